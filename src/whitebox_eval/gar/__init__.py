"""Paper 002: the GAR benchmark of compositional relational reasoning.

Schemas (table 1) in :mod:`.schemas`, tasks and identifiers (sec. 2) in :mod:`.tasks`,
the example generator (sec. 2 workflow) in :mod:`.generator`, prompt text and role
spans (App. B) in :mod:`.prompts`, scoring (App. C, sec. 3) in :mod:`.evaluation`.
"""

from whitebox_eval.gar.generator import (
    GARExample,
    LoopDraw,
    generate_gar,
    generate_task_examples,
    sample_loop,
)
from whitebox_eval.gar.prompts import RoleSpans, answer_token_ids, token_spans
from whitebox_eval.gar.schemas import Relation, Schema, load_schema, load_schemas
from whitebox_eval.gar.tasks import (
    GARTask,
    RelationRef,
    enumerate_tasks,
    format_task_id,
    kr_tasks,
    parse_task_id,
)

__all__ = [
    "GARExample", "GARTask", "LoopDraw", "Relation", "RelationRef", "RoleSpans", "Schema",
    "answer_token_ids", "enumerate_tasks", "format_task_id", "generate_gar",
    "generate_task_examples", "kr_tasks", "load_schema", "load_schemas", "parse_task_id",
    "sample_loop", "token_spans",
]
