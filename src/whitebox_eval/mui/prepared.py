"""The task side of a MUI study (paper 001 App. A.6): its items, prompts, responses and how a
response is scored, ready for the study's passes (:mod:`.study`) and masking (:mod:`.masking`)."""

from __future__ import annotations

from dataclasses import dataclass

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.mui import responses as rsp
from whitebox_eval.tasks.generation import GenItem, GenTask, load_generation
from whitebox_eval.tasks.registry import Generation
from whitebox_eval.tasks.spec import TaskSpec


@dataclass
class PreparedTask:
    """Items, prompt format and generation settings of one study (``gen``: the task's items and
    scoring, ``style``: how the dataset is asked, ``demonstration``: a file's own one-shot row)."""

    spec: TaskSpec
    items: list[GenItem]
    fmt: rsp.PromptFormat
    max_new_tokens: int
    stops: tuple[str, ...]
    given: dict[str, str] | None
    gen: GenTask | None = None
    style: Generation | None = None
    demonstration: tuple[str, str] | None = None
    budget_given: bool = False  # --max-new-tokens (else an item's own budget wins: lm-eval's max_gen_toks)
    stops_given: bool = False  # --stop (else an item's own stop strings win: lm-eval's until)

    def prompt_text(self, item: GenItem, tokenizer) -> str:
        """The prompt of ``item`` as text (App. A.6 format, or the task's own prompt)."""
        return rsp.build_prompt(item, self.style or self.spec.record.generation, self.fmt, tokenizer, self.demonstration)

    def prompt(self, item: GenItem, tokenizer) -> list[int]:
        """The prompt ids of ``item`` (:meth:`prompt_text` tokenized)."""
        return rsp.prompt_ids(tokenizer, self.prompt_text(item, tokenizer))

    def settings(self, item: GenItem) -> tuple[tuple[str, ...], int]:
        """(stop strings, token budget) of ``item``."""
        stops = self.stops if self.stops_given or item.stops is None else item.stops
        budget = self.max_new_tokens if self.budget_given or item.max_new_tokens is None else item.max_new_tokens
        return stops, budget

    def score(self, item: GenItem, response: rsp.Response, tokenizer) -> dict:
        """``{"correct": bool, "text": what was checked, ...}`` by the task's check; lm-eval's tasks
        check the text lm-eval's HF backend keeps (every generated token decoded without special
        tokens, cut at ``until``)."""
        text = response.text
        if item.check == "lm-eval" and response.generated is not None:
            from whitebox_eval.tasks.lm_eval_generation import lm_eval_text

            text = lm_eval_text(tokenizer.decode(response.generated, skip_special_tokens=True), self.settings(item)[0])
        out = (self.gen.score(item, text) if self.gen is not None else {"correct": False})
        return {**out, "text": text}


def prepare_task(cfg, tokenizer) -> PreparedTask:
    """Load the task's items and resolve prompt format, token budget, stop strings and given responses
    (``cfg``: a :class:`~whitebox_eval.mui.study.MUIConfig`)."""
    spec = cfg.spec
    fmt = rsp.PromptFormat.resolve(tokenizer, cfg.shots, cfg.chat)
    style = spec.record.generation
    options = {}
    if spec.is_lm_eval:
        if cfg.chat == "on":
            raise WhiteboxError(f"--chat on does not apply to --task {spec}: lm-eval's context is used as it is")
        options = {"shots": None if cfg.shots in ("auto", None) else int(cfg.shots), "lm_eval_data": cfg.lm_eval_data,
                   "allow_code_execution": cfg.allow_code_execution}
    elif cfg.lm_eval_data:
        raise WhiteboxError("--lm-eval-data applies to --task lm-eval:TASK only")
    elif spec.record.runs_code:  # HumanEval: refused in one line without the flag
        options = {"allow_code_execution": cfg.allow_code_execution}
    elif cfg.allow_code_execution:
        raise WhiteboxError("--allow-code-execution applies to --task lm-eval:TASK and humaneval=PATH only")
    own_demo = fmt.shots == 1 and style.demonstration is None and not spec.is_lm_eval
    limit = None if cfg.limit is None else cfg.limit + own_demo
    gen = load_generation(spec, limit=limit, seed=cfg.seed, n_options=cfg.n_options, on_bad_row=cfg.on_bad_row,
                          **options)
    items, demonstration = list(gen.items), None
    if own_demo and items and items[0].prompt is None:  # a file without an App. C example: its first row
        first = items.pop(0)
        demonstration = (first.question, first.gold_response.strip())
    elif own_demo and cfg.limit is not None:
        items = items[:cfg.limit]
    if not items:
        raise WhiteboxError(f"task {spec} gave no items")
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise WhiteboxError("item ids are not unique; every row needs its own id")
    given = None
    if cfg.responses == "gold":
        given = {it.id: it.gold_response for it in items}
    elif cfg.responses != "model":
        given = rsp.load_responses_file(cfg.responses)
        missing = [i for i in ids if i not in given]
        if missing:
            raise WhiteboxError(f"{cfg.responses} has no response for {len(missing)} item(s), e.g. {missing[:3]}")
    max_new = cfg.max_new_tokens or style.max_new_tokens
    stops = tuple(cfg.stop) if cfg.stop is not None else style.stops
    return PreparedTask(spec, items, fmt, max_new, stops, given, gen, style, demonstration,
                        budget_given=cfg.max_new_tokens is not None, stops_given=cfg.stop is not None)


def respond(lm, task: PreparedTask, items: list[GenItem], *, edits=None, engine=None) -> tuple[list[list[int]], list[rsp.Response]]:
    """Prompt ids and responses (generated, or given) for ``items``; items with other stop strings
    or budgets (the tasks of an lm-eval group) are generated apart."""
    prompts = [task.prompt(it, lm.tokenizer) for it in items]
    if task.given is not None:
        return prompts, [rsp.given_response(lm.tokenizer, task.given[it.id]) for it in items]
    groups: dict[tuple, list[int]] = {}
    for j, it in enumerate(items):
        groups.setdefault(task.settings(it), []).append(j)
    responses: list[rsp.Response | None] = [None] * len(items)
    for (stops, budget), rows in groups.items():
        for j, r in zip(rows, rsp.generate_responses(lm, [prompts[j] for j in rows], max_new_tokens=budget, stops=stops,
                                                     edits=edits, engine=engine)):
            responses[j] = r
    return prompts, responses
