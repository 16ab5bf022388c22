"""Targets, tasks and the vocabulary of filter values (for forms and clients)."""

from __future__ import annotations

from fastapi import APIRouter

from knowledge.models import ExperienceStatus, RunStatus
from knowledge.taxonomy import Isa, Operator, Technique
from service.api import views
from service.api.deps import ReaderKey, StateDep, StoreDep
from service.api.schemas import ErrorResponse, TargetOut, TaskOut, Vocabulary

router = APIRouter(tags=["catalog"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/targets", response_model=list[TargetOut])
def list_targets(_: ReaderKey, store: StoreDep) -> list[TargetOut]:
    """Hardware targets the evaluator knows, with how many experiences each holds."""
    from evaluator.targets import list_targets as evaluator_targets

    counts = views.experience_counts(store, "target_key")
    return [
        TargetOut(
            **t.model_dump(include=set(TargetOut.model_fields)), experiences=counts.get(t.key, {}).get("experiences", 0)
        )
        for t in evaluator_targets()
    ]


@router.get("/tasks", response_model=list[TaskOut])
def list_tasks(_: ReaderKey, state: StateDep) -> list[TaskOut]:
    """Kernel tasks (bundled suite and settings.task_dirs) with experiences and best speedup so far."""
    from evaluator.tasks import list_tasks as evaluator_tasks

    counts = views.experience_counts(state.container.store, "task_id")
    out = []
    for t in evaluator_tasks(state.settings):
        c = counts.get(t.name, {})
        out.append(
            TaskOut(
                name=t.name,
                category=str(t.category),
                operator=str(t.operator),
                dtype=t.dtype,
                description=t.description,
                signature=t.signature,
                bench_size=t.bench_size,
                experiences=c.get("experiences", 0),
                best_speedup=c.get("best_speedup"),
                best_competent_speedup=c.get("best_competent_speedup"),
            )
        )
    return out


@router.get("/vocabulary", response_model=Vocabulary)
def vocabulary(_: ReaderKey) -> Vocabulary:
    """The values the filters accept."""
    return Vocabulary(
        kinds=["thought", "idea", "experience"],
        isas=[i.value for i in Isa],
        operators=[o.value for o in Operator],
        techniques=[t.value for t in Technique],
        statuses=[s.value for s in ExperienceStatus],
        run_statuses=[s.value for s in RunStatus],
    )
