"""Every kind `loom apply` serves: one handler per family, from each dialect's room. A new
dialect adds its handler here (the interface is `loom.dialects.kinds.KindHandler`)."""

from __future__ import annotations

from loom.dialects.apply.core import CoreObjects
from loom.dialects.kinds import KindHandler
from loom.dialects.kubeflow.experiments import KatibExperiments
from loom.dialects.kubeflow.jobs import TrainingJobs
from loom.dialects.kubeflow.services import InferenceServices


def handlers() -> list[KindHandler]:
    return [CoreObjects(), TrainingJobs(), KatibExperiments(), InferenceServices()]
