"""Pure types and rules: the manifest, job states, resources and error codes.

Imports nothing else of loom. Kept free of heavy imports at package level so that the learner
wrapper can use `loom.domain.states` without paying for pydantic.
"""
