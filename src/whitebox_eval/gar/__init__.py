"""Paper 002: the GAR benchmark of compositional relational reasoning.

Schemas (table 1) in :mod:`.schemas`, tasks and identifiers (sec. 2) in :mod:`.tasks`,
the example generator (sec. 2 workflow) in :mod:`.generator`, prompt text and role
spans (App. B) in :mod:`.prompts`, scoring (App. C, sec. 3) in :mod:`.evaluation`.

On the engine: token positions of roles and attention patterns in :mod:`.roles`,
first-token probabilities from one pass per batch in :mod:`.scoring`, head activation,
matched attention, EAP-IG attribution and True/False heads (secs. 4-5) in :mod:`.heads`,
strong / weak / knock-out and True/False interventions in :mod:`.interventions`, the
App. E truth probe in :mod:`.probe`, plots in :mod:`.plots`.  The resumable studies, one
per mode: :mod:`.evaluate_study`, :mod:`.attribute_study`, :mod:`.truth_heads`,
:mod:`.intervene_study`, :mod:`.probe_study` (their configs in :mod:`.config`, tasks and examples a
run covers in :mod:`.selection`, what they share in :mod:`.study_base`); the ``whitebox-eval gar``
command in :mod:`.command`.
"""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.gar.generator": ["GARExample", "LoopDraw", "generate_gar", "generate_task_examples", "sample_loop"],
    "whitebox_eval.gar.prompts": ["RoleSpans"],
    "whitebox_eval.gar.roles": ["EncodedExample", "answer_token_ids", "encode_examples", "parse_pattern",
                                "token_spans"],
    "whitebox_eval.gar.schemas": ["Relation", "Schema", "load_schema", "load_schemas"],
    "whitebox_eval.gar.tasks": ["GARTask", "RelationRef", "enumerate_tasks", "format_task_id", "kr_tasks", "parse_task_id"],
})
