"""Hyperparameter search: experiments in Katib's form, whose trials are ordinary Loom jobs,
proposed by Optuna's samplers and stopped early by its pruners on the trials' live metrics."""
