"""Job environments: the packages a job asked for, built once per machine and shared read-only.

`builder` makes and reuses them (with `uv`); `cache` removes the ones no job wants any more.
Used by the learner wrapper, on whichever machine runs the learner: nothing here needs a disk
shared with the platform.
"""
