"""``--task lm-eval:NAME``: any multiple-choice task of lm-evaluation-harness, read through
lm-eval's own task objects (the optional extra ``whitebox-eval[lm-eval]``).

Nothing of a task's template is re-written here. lm-eval's ``TaskManager`` builds the task
(or every task of a group or tag) from its installed YAML; :func:`load_items` then does
what ``lm_eval.simple_evaluate`` does before it calls a model: the few-shot count
(``--shots``, unless the task's config fixes it at 0), the few-shot seed 1234, and
``build_all_requests``. Each document becomes one :class:`MCQItem` whose ``meta`` holds:

- ``lm_eval_requests``: lm-eval's ``(context, continuation)`` pairs in choice order, the
  **cloze view**: scored as they are, so log-likelihoods, ``acc`` and ``acc_norm`` are
  lm-eval's (``acc_norm`` divides by the characters of ``doc_to_choice``, as lm-eval does);
- the **letters view** (:func:`letters_doc`): the question (``doc_to_text``) and the
  options listed as ``A. ..`` lines before ``Answer:``, so the head scores apply. A task
  that already letters its options (commonsense_qa, MMLU) keeps lm-eval's exact text (the
  item's options are the listed texts); otherwise ``doc_to_text`` loses a final
  ``Answer:`` cue and gets the lettered choices and the cue (our rendering, recorded as
  such). ``lm_eval_demos`` are the documents lm-eval's own sampler drew for that item,
  rendered the same way.

``--lm-eval-data DIR`` points a task's dataset at local files, as lm-eval runs offline:
``DIR/<split>.jsonl`` (or ``DIR/<task>/<split>.jsonl`` for the tasks of a group), the
task's hub schema; a split without a file is set to null, exactly like an override of
``dataset_path: json`` in the task's YAML.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitebox_eval.datafiles import json_objects, note_read, open_text
from whitebox_eval.errors import WhiteboxError
from whitebox_eval.tasks.items import MCQItem
from whitebox_eval.tasks.lm_eval import FEWSHOT_SEED, letters_doc, letters_text

PREFIX = "lm-eval:"
INSTALL = "pip install 'whitebox-eval[lm-eval]'"
CLOZE, LETTERS = "cloze", "letters"
VIEWS = (CLOZE, LETTERS)
_SPLITS = {"train": "training_split", "validation": "validation_split", "test": "test_split"}
_DATA_SUFFIXES = (".jsonl", ".json")


@dataclass
class TaskInfo:
    """What config.yaml and results.json record of one lm-eval task."""

    name: str
    version: Any
    num_fewshot: int
    metrics: list[str]
    n_docs: int
    eval_split: str | None
    fewshot_split: str | None
    sampler: str
    letters_native: bool
    multiple_input: bool
    data_files: dict[str, str] = field(default_factory=dict)

    def to_config(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _import_lm_eval():
    try:
        import lm_eval  # noqa: F401
        from lm_eval.tasks import TaskManager
    except ImportError as e:
        raise WhiteboxError(f"--task {PREFIX}NAME reads lm-eval's own task configs and needs lm-eval installed: "
                            f"{INSTALL} ({e})") from e
    return TaskManager


@functools.lru_cache(maxsize=1)
def _task_manager():
    """lm-eval's index of its installed task configs (built once per process: it reads every YAML)."""
    return _import_lm_eval()()


def _data_folder(data: str | Path | None, task: str) -> dict[str, str]:
    """The split files for ``task`` under ``data``: ``data/<task>/`` if it exists, else ``data``."""
    if data is None:
        return {}
    root = Path(data).expanduser()
    if not root.is_dir():
        raise WhiteboxError(f"--lm-eval-data {data}: not a folder; give a folder of <split>.jsonl files "
                            "(train.jsonl, validation.jsonl, test.jsonl, ...) in the task's hub schema")
    folder = root / task if (root / task).is_dir() else root
    files = {p.stem: str(p.resolve()) for p in sorted(folder.iterdir()) if p.suffix in _DATA_SUFFIXES and p.is_file()}
    for f in files.values():  # config.yaml's data_files: a changed file stops --resume
        note_read(f)
        _check_split_file(f)
    if not files:
        raise WhiteboxError(f"--lm-eval-data {data}: no <split>.jsonl files for task {task} in {folder}")
    return files


def _check_split_file(path: str) -> None:
    """A split file that lm-eval's json loader can read (JSON lines, or for ``.json`` one JSON
    document); else one line naming the file, the line and the parse error (the datasets
    library would say only "DatasetGenerationError")."""
    if path.endswith(".json"):
        with open_text(path) as f:
            try:
                json.load(f)
                return
            except json.JSONDecodeError:
                pass  # JSON lines, then: each line is checked below
    try:
        for _ in json_objects(path):
            pass
    except WhiteboxError as e:
        raise WhiteboxError(f"--lm-eval-data: {e}") from None


def _overrides(cfg: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """The YAML override that points the task at local files; splits without a file are null."""
    out: dict[str, Any] = {"dataset_path": "json", "dataset_name": None, "dataset_kwargs": {"data_files": files}}
    for split, key in _SPLITS.items():
        if cfg.get(key) and cfg[key] not in files:
            out[key] = None
    evaluated = [cfg.get(k) for k in ("test_split", "validation_split") if cfg.get(k)]
    if not any(name in files for name in evaluated):
        raise WhiteboxError(f"lm-eval's {cfg.get('task')} evaluates its {' or '.join(map(repr, evaluated)) or 'test'} "
                            f"split but the data folder has no {' or '.join(f'{n}.jsonl' for n in evaluated)} "
                            f"(found: {', '.join(sorted(files))})")
    for key in ("training_split", "validation_split", "test_split", "fewshot_split"):
        name = out.get(key, cfg.get(key))
        if name and name not in files:
            raise WhiteboxError(f"lm-eval's {cfg.get('task')} reads split {name!r} ({key}) but the data folder has "
                                f"no {name}.jsonl (found: {', '.join(sorted(files))})")
    return out


def _leaves(tm, name: str) -> list[str]:
    """The task names under a task, group or tag, from lm-eval's index (no data is read)."""
    entry = tm.task_index[name]
    kind = entry.kind.name
    if kind in ("TASK", "PY_TASK"):
        return [name]
    if kind == "TAG":
        return sorted(n for n, e in tm.task_index.items() if name in (e.tags or ()) and e.kind.name in ("TASK", "PY_TASK"))
    out: list[str] = []
    for child in (entry.cfg or {}).get("task", []):
        child_name = child if isinstance(child, str) else child.get("task") if isinstance(child, dict) else None
        if isinstance(child_name, str) and child_name in tm.task_index:
            out += [n for n in _leaves(tm, child_name) if n not in out]
    return out


MC_ONLY = ("multiple_choice",)
WRONG_TYPE = {"multiple_choice": "only multiple_choice tasks are scored here (generate_until tasks: the mui command)",
              "generate_until": "only generate_until tasks are generated here"}


def output_types(name: str) -> dict[str, str | None]:
    """``{task: output_type}`` of every task under lm-eval's ``name`` (a task, group or tag), read
    from lm-eval's index of its YAML files (nothing is built, no data is read)."""
    tm = _task_manager()
    _known(tm, name)
    return {leaf: (tm.task_index[leaf].cfg or {}).get("output_type") for leaf in _leaves(tm, name)}


def task_config(name: str) -> dict[str, Any]:
    """The YAML config of one lm-eval task, as lm-eval's index holds it (nothing is built)."""
    tm = _task_manager()
    _known(tm, name)
    return dict(tm.task_index[name].cfg or {})


def _known(tm, name: str) -> None:
    if name not in tm.task_index:
        close = difflib.get_close_matches(name, tm.all_tasks, n=3)
        raise WhiteboxError(f"lm-eval has no task, group or tag {name!r}"
                            + (f"; did you mean {', '.join(close)}?" if close else "; `lm_eval ls tasks` lists them"))


def build_tasks(name: str, data: str | Path | None, allowed: tuple[str, ...] = MC_ONLY) -> list[tuple[Any, dict[str, str]]]:
    """lm-eval's task objects under ``name`` (with ``data``: read from local files), each with its
    split files; a task of another output type than ``allowed`` is refused in one line."""
    if data is not None:
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    tm = _task_manager()
    try:
        built = _build(tm, name, data, allowed)
    except WhiteboxError:
        raise
    except Exception as e:  # lm-eval / datasets failing to read the data: one line with the cause
        raise WhiteboxError(f"lm-eval could not build task {name}: {type(e).__name__}: {e}"
                            + ("" if data else " (offline? point it at local files with --lm-eval-data DIR)")) from e
    for task, _ in built:
        if task.OUTPUT_TYPE not in allowed:
            raise WhiteboxError(f"lm-eval's {task.task_name} is a {task.OUTPUT_TYPE} task; {WRONG_TYPE[allowed[0]]}")
    return built


def _build(tm, name: str, data: str | Path | None, allowed: tuple[str, ...] = MC_ONLY) -> list[tuple[Any, dict[str, str]]]:
    _known(tm, name)
    for leaf in _leaves(tm, name) if tm.task_index[name].kind.name in ("TASK", "PY_TASK") else ():
        otype = (tm.task_index[leaf].cfg or {}).get("output_type")
        if otype and otype not in allowed:
            raise WhiteboxError(f"lm-eval's {leaf} is a {otype} task; {WRONG_TYPE[allowed[0]]}")
    if data is None:
        loaded = tm.load([name])
        return [(t, {}) for t in loaded["tasks"].values()]
    out = []
    for leaf in _leaves(tm, name):
        entry = tm.task_index[leaf]
        files = _data_folder(data, leaf)
        task = tm._factory.build(entry, overrides=_overrides(dict(entry.cfg or {}, task=leaf), files),
                                 registry=tm.task_index)
        out.append((task, files))
    if not out:
        raise WhiteboxError(f"lm-eval's {name} names no task to read from local files")
    return out


def _gold(task, doc: dict, choices: list[str]) -> int:
    """The gold index as lm-eval's ``process_results`` reads it (an int, or a choice's text)."""
    gold = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
    if isinstance(gold, str) and gold.isdigit() and not task.multiple_input:
        gold = int(gold)
    if isinstance(gold, list):
        raise WhiteboxError(f"lm-eval's {task.task_name} has several gold answers per document; "
                            "only one gold choice per item can be scored here")
    if isinstance(gold, str):
        if gold not in choices:
            raise WhiteboxError(f"lm-eval's {task.task_name}: target {gold!r} is not one of the choices {choices}")
        gold = choices.index(gold)
    return int(gold)


_LETTER_LINE = "\n{label}. "


def _native_letters(text: str, choices: list[str]) -> tuple[str, list[str]] | None:
    """``(question, option texts)`` when lm-eval's prompt already lists the choices as
    ``\nA. text`` lines before ``Answer:`` and scores the letters (commonsense_qa, MMLU),
    such that :func:`letters_doc` gives lm-eval's text back exactly; else None."""
    labels = [chr(ord("A") + i) for i in range(len(choices))]
    if choices != labels or not labels:
        return None
    first = text.find(_LETTER_LINE.format(label="A"))
    if first < 0:
        return None
    options, pos = [], first
    for lab in labels:
        at = text.find(_LETTER_LINE.format(label=lab), pos)
        if at < 0:
            return None
        start = at + len(_LETTER_LINE.format(label=lab))
        end = text.find("\n", start)
        options.append(text[start:end] if end >= 0 else text[start:])
        pos = start
    question = text[:first]
    if letters_text(question, options) != text:
        return None
    return question, options


def _question_and_options(text: str, choices: list[str]) -> tuple[str, list[str]]:
    native = _native_letters(text, choices)
    return native if native is not None else (text, list(choices))


def _sampler_name(task) -> str:
    sampler = getattr(getattr(task, "fewshot_cfg", None), "sampler", None) or "default"
    return sampler if isinstance(sampler, str) else getattr(sampler, "__name__", str(sampler))


def build_requests(task, shots: int | None) -> tuple[int, list[list[dict]], dict[int, list]]:
    """What ``lm_eval.simple_evaluate`` does before it calls a model: the few-shot count
    (``shots``, unless the task's config fixes it at 0), the few-shot seed 1234 and
    ``build_all_requests``. Returns the shot count, the documents lm-eval's own sampler drew
    for each document in order, and the task's instances by document id."""
    if shots is not None and task.get_config("num_fewshot") != 0:
        task.set_config(key="num_fewshot", value=shots)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=FEWSHOT_SEED)
    drawn: list[list[dict]] = []
    sampler = getattr(task, "sampler", None)
    if sampler is not None:  # record the documents lm-eval's own sampler draws, per item in order
        original = sampler.sample

        def recording(*a, _original=original, **kw):
            out = _original(*a, **kw)
            drawn.append(list(out))
            return out

        sampler.sample = recording
    task.build_all_requests(limit=None, rank=0, world_size=1, cache_requests=False)
    if sampler is not None:
        sampler.sample = original
    by_doc: dict[int, list] = {}
    for inst in task.instances:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    k = int(task.get_config("num_fewshot") or 0)
    if k and len(drawn) != len(by_doc):
        raise WhiteboxError(f"lm-eval's {task.task_name}: {len(drawn)} few-shot draws for {len(by_doc)} documents; "
                            "this lm-eval version builds prompts differently (supported: 0.4.13)")
    return k, drawn, by_doc


def load_items(name: str, *, shots: int | None, data: str | Path | None = None) -> tuple[list[MCQItem], list[TaskInfo]]:
    """Every document of lm-eval's ``name`` (a task, group or tag) as an item with its cloze
    requests and letters view (module docstring), and what each task is."""
    items: list[MCQItem] = []
    infos: list[TaskInfo] = []
    for task, files in build_tasks(name, data):
        tname = task.task_name
        if callable(task.config.process_results):
            raise WhiteboxError(f"lm-eval's {tname} scores with its own process_results function; only tasks scored "
                                "by lm-eval's standard multiple-choice metrics (acc, acc_norm) are supported")
        k, drawn, by_doc = build_requests(task, shots)
        metrics = tuple(m for m in task._metric_fn_list if m in ("acc", "acc_norm", "acc_bytes"))
        letters_ok = True
        for n, doc_id in enumerate(sorted(by_doc)):
            insts = sorted(by_doc[doc_id], key=lambda i: i.idx)
            doc = insts[0].doc
            choices = [str(c) for c in task.doc_to_choice(doc)]
            requests = [[str(i.arguments[0]), str(i.arguments[1])] for i in insts][:len(choices)]
            gold = _gold(task, doc, choices)
            description = task.resolve_field(doc, task.config.description) or ""
            text = task.doc_to_text(doc)
            meta: dict[str, Any] = {"lm_eval_task": tname, "doc_id": int(doc_id), "lm_eval_requests": requests,
                                    "lm_eval_choices": choices}
            if task.multiple_input:  # one context per choice: there is no question to letter
                letters_ok = False
                question, options = requests[0][1].strip() or tname, choices
            else:
                question, options = _question_and_options(str(text), choices)
                demos = []
                for fs in (drawn[n] if k else [])[:k]:
                    fs_choices = [str(c) for c in task.doc_to_choice(fs)]
                    fs_q, fs_opts = _question_and_options(str(task.doc_to_text(fs)), fs_choices)
                    demos.append(letters_doc(MCQItem(
                        id=f"{tname}/demo", question=fs_q, options=fs_opts, gold=_gold(task, fs, fs_choices),
                        meta={"lm_eval_task": tname, "lm_eval_description": description,
                              "lm_eval_metrics": list(metrics)})))
                meta["lm_eval_demos"] = demos
            meta.update(lm_eval_description=description, lm_eval_metrics=list(metrics))
            items.append(MCQItem(id=f"{tname}/{doc_id}", question=question, options=options, gold=gold,
                                 subject=tname, meta=meta))
        fs_split = task.config.fewshot_split if task.config.fewshot_split else (
            task.config.training_split or task.config.validation_split)
        infos.append(TaskInfo(
            name=tname, version=(task.config.metadata or {}).get("version"), num_fewshot=k, metrics=list(metrics),
            n_docs=len(by_doc), eval_split=task.config.test_split or task.config.validation_split,
            fewshot_split=fs_split if k else None,
            sampler=_sampler_name(task) if k else "none",
            letters_native=letters_ok and all(it.options != it.meta["lm_eval_choices"] for it in items
                                              if it.meta["lm_eval_task"] == tname),
            multiple_input=bool(task.multiple_input), data_files=files))
    if not items:
        raise WhiteboxError(f"lm-eval's {name} gave no documents")
    return items, infos
