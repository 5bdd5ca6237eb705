"""Object storage: the platform's artifact store and the jobs' data stores."""
