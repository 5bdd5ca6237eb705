"""Registered models and their versions as MLflow's registry shows them: descriptions, tags,
stages and aliases beside Loom's own provenance. Pure types and rules."""

from __future__ import annotations

from dataclasses import dataclass, field

from loom.domain.errors import InvalidInput

STAGES = ("None", "Staging", "Production", "Archived")
ARCHIVABLE = ("Staging", "Production")  # stages that `archive_existing_versions` clears


@dataclass
class VersionRecord:
    model: str
    version: int
    created_at: float
    updated_at: float
    stage: str
    description: str
    source: str  # where its files came from: runs:/…, models:/…, or the job that made it
    run_id: str
    job_id: str
    tags: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    owner_name: str = ""

    @property
    def logged_model(self) -> str:
        """The MLflow logged model the files came from, if they did."""
        rest = self.source.removeprefix("models:/")
        return rest if rest != self.source and rest.startswith("m-") else ""


@dataclass
class ModelRecord:
    name: str
    created_at: float
    updated_at: float
    description: str
    tags: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, int] = field(default_factory=dict)
    latest: list[VersionRecord] = field(default_factory=list)  # the newest of each stage


def stage_named(text: str) -> str:
    """A stage by its name in any case (`staging` → `Staging`)."""
    for stage in STAGES:
        if stage.lower() == text.strip().lower():
            return stage
    raise InvalidInput(f"stage: one of {', '.join(STAGES)}, got {text!r:.40}", field="stage")


def latest_by_stage(
    versions: list[VersionRecord], stages: tuple[str, ...] | None = None
) -> list[VersionRecord]:
    """The newest version in each stage (of `stages`, or all), newest stage first."""
    found: dict[str, VersionRecord] = {}
    for version in sorted(versions, key=lambda v: -v.version):
        if (stages is None or version.stage in stages) and version.stage not in found:
            found[version.stage] = version
    return list(found.values())
