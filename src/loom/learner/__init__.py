"""The learner wrapper: a separate process that runs one learner of a job.

It talks to the platform over HTTP only, and imports nothing heavy, so that it starts fast and runs
the same on this machine, a Ray worker or a Kubernetes pod.
"""
