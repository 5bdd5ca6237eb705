"""A model version's factsheet (after IBM's AI FactSheets): where it came from (job, code
digest, data stores, environment, parameters, lineage), how it trained (final metrics), what
evaluations found (accuracy, fairness, robustness, explanations), how it fared in service
(drift history) and where it is served — as JSON, and as Markdown to keep beside a release."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select

from loom.registry import evaluations
from loom.registry.models import ModelRegistry
from loom.store.tables import Deployment, DriftWindow, ModelEvaluation

DRIFT_SHOWN = 20


def factsheet(
    registry: ModelRegistry, owner: str, owner_name: str, name: str, ref: str
) -> dict[str, Any]:
    version = registry.version(owner, name, ref)
    model = registry.summary(owner, name).model
    manifest = version.manifest or {}
    with registry.db.session() as session:
        windows = list(
            session.scalars(
                select(DriftWindow)
                .where(
                    DriftWindow.owner_id == owner,
                    DriftWindow.model_name == name,
                    DriftWindow.model_version == version.version,
                )
                .order_by(DriftWindow.at.desc())
            )
        )
        served = [
            row.name
            for row in session.scalars(
                select(Deployment).where(
                    Deployment.owner_id == owner, Deployment.model_name == name
                )
            )
            if version.version in (row.model_version, row.canary_version)
        ]
    found = evaluations.of_version(registry.db, model.id, version.version)
    return {
        "model": name,
        "version": version.version,
        "owner": owner_name,
        "created_at": version.created_at,
        "provenance": {
            "job_id": version.job_id,
            "code_digest": version.code_digest,
            "framework": version.framework,
            "data_stores": version.data_stores,
            "environment": manifest.get("environment"),
            "parameters": (version.run_info or {}).get("params", {}),
            "tags": (version.run_info or {}).get("tags", {}),
            "lineage": version.lineage,
            "files": [{"path": f["path"], "digest": f["digest"]} for f in version.files],
        },
        "reference_data": any(f["path"] == "reference.npz" for f in version.files),
        "training_metrics": version.metrics,
        "evaluations": [_evaluation(e) for e in found],
        "drift": {
            "windows": len(windows),
            "drifted": sum(1 for w in windows if w.drift),
            "last": [_window(w) for w in windows[:DRIFT_SHOWN]],
        },
        "deployments": served,
    }


def _evaluation(found: ModelEvaluation) -> dict[str, Any]:
    return {
        "kind": found.kind,
        "results": found.results,
        "job_id": found.job_id,
        "at": found.created_at,
        "lineage": found.lineage,
    }


def _window(w: DriftWindow) -> dict[str, Any]:
    return {
        "at": w.at,
        "deployment": w.deployment,
        "drift": w.drift,
        "score": w.score,
        "p_value": w.p_value,
        "features": w.features,
        "outliers": w.outliers,
    }


def markdown(sheet: dict[str, Any]) -> str:
    """The factsheet as a Markdown document."""
    out = [f"# Factsheet: {sheet['model']} version {sheet['version']}", ""]
    out += [f"- Owner: {sheet['owner']}", f"- Created: {_when(sheet['created_at'])}"]
    out.append(f"- Served by: {', '.join(sheet['deployments']) or 'no deployment'}")
    out.append(f"- Reference data: {'kept' if sheet['reference_data'] else 'none'}")
    provenance = sheet["provenance"]
    out += ["", "## Provenance", "", "| | |", "|---|---|"]
    out.append(f"| job | `{provenance['job_id']}` |")
    out.append(f"| code digest | `{provenance['code_digest']}` |")
    out.append(f"| framework | {provenance['framework']} |")
    out.append(f"| data stores | {', '.join(provenance['data_stores']) or '—'} |")
    out.append(f"| environment | {_inline(provenance['environment'])} |")
    out.append(f"| parameters | {_inline(provenance['parameters'])} |")
    out.append(f"| lineage | {_inline(provenance['lineage'])} |")
    out += ["", "## Training metrics", ""]
    out += [f"- {k}: {v:.4g}" for k, v in sorted(sheet["training_metrics"].items())] or ["- none"]
    out += ["", "## Evaluations", ""]
    for found in sheet["evaluations"]:
        values = ", ".join(f"{k}: {_short(v)}" for k, v in found["results"].items())
        out.append(f"- **{found['kind']}** (job `{found['job_id']}`): {values}")
    if not sheet["evaluations"]:
        out.append("- none recorded")
    drift = sheet["drift"]
    out += ["", "## Drift", "", f"{drift['drifted']} of {drift['windows']} windows drifted."]
    if drift["last"]:
        out += ["", "| tested | deployment | drift | score | p-value | features |",
                "|---|---|---|---|---|---|"]  # fmt: skip
        for w in drift["last"]:
            out.append(
                f"| {_when(w['at'])} | {w['deployment']} | {'yes' if w['drift'] else 'no'} | "
                f"{w['score']:.3f} | {w['p_value']:.2g} | {', '.join(w['features'])} |"
            )
    return "\n".join(out) + "\n"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _inline(value: Any) -> str:
    if not value:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items())
    return str(value)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in list(value.items())[:8]) + "}"
    return str(value)
