"""Projects (MLflow's experiments): named per owner, with tags; project 0 is the Default."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from loom.domain.errors import AlreadyExists
from loom.domain.runs import DEFAULT_PROJECT, DEFAULT_PROJECT_NAME, ProjectRecord, Stage
from loom.store.tables import Project, ProjectTag


def artifact_location(project_id: int) -> str:
    return f"mlflow-artifacts:/{project_id}"


def create(session: Session, owner_id: str, name: str, now_ms: int) -> Project:
    """A new project of `owner_id`; raises `AlreadyExists` if the name is taken (deleted
    projects keep their names until purged, as MLflow's)."""
    if name == DEFAULT_PROJECT_NAME or named(session, owner_id, name) is not None:
        raise AlreadyExists(f"an experiment (project) named {name!r} exists already")
    project = Project(
        owner_id=owner_id,
        name=name,
        artifact_location="",
        stage=Stage.ACTIVE.value,
        created_at=now_ms,
        updated_at=now_ms,
    )
    session.add(project)
    session.flush()
    project.artifact_location = artifact_location(project.id)
    return project


def get(session: Session, project_id: int) -> Project | None:
    return session.get(Project, project_id)


def named(session: Session, owner_id: str, name: str) -> Project | None:
    """The owner's project of that name, or the Default one by its name."""
    if name == DEFAULT_PROJECT_NAME:
        return session.get(Project, DEFAULT_PROJECT)
    query = select(Project).where(Project.owner_id == owner_id, Project.name == name)
    return session.scalars(query).first()


def rename(session: Session, project: Project, name: str, now_ms: int) -> None:
    if project.owner_id is None or name == DEFAULT_PROJECT_NAME:
        raise AlreadyExists(f"an experiment (project) named {name!r} exists already")
    taken = named(session, project.owner_id, name)
    if taken is not None and taken.id != project.id:
        raise AlreadyExists(f"an experiment (project) named {name!r} exists already")
    project.name, project.updated_at = name, now_ms


def set_tag(session: Session, project: Project, key: str, value: str, now_ms: int) -> None:
    session.merge(ProjectTag(project_id=project.id, key=key, value=value))
    project.updated_at = now_ms


def delete_tag(session: Session, project: Project, key: str) -> bool:
    query = delete(ProjectTag).where(ProjectTag.project_id == project.id, ProjectTag.key == key)
    return bool(session.execute(query).rowcount)  # type: ignore[attr-defined]


def records(session: Session, projects: Sequence[Project]) -> list[ProjectRecord]:
    """The projects with their tags, in one query for the lot."""
    tags: dict[int, dict[str, str]] = {p.id: {} for p in projects}
    if tags:
        query = select(ProjectTag).where(ProjectTag.project_id.in_(list(tags)))
        for tag in session.scalars(query.order_by(ProjectTag.key)):
            tags[tag.project_id][tag.key] = tag.value
    return [
        ProjectRecord(
            id=p.id,
            owner_id=p.owner_id,
            name=p.name,
            artifact_location=p.artifact_location,
            stage=p.stage,
            created_at=p.created_at,
            updated_at=p.updated_at,
            tags=tags[p.id],
        )
        for p in projects
    ]
