"""The model registry: trained models as versions with provenance, files in the artifact store."""
