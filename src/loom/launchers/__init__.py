"""Launchers: how learners are started, watched and stopped. The lifecycle decides when."""
