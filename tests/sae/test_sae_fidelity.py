"""SAE fidelity figures, truncated residual collection, the TopK trainer's gradients and aux loss,
and `mui train-sae` on a tiny model (paper 001 sec. 2.1.2; Gao et al. 2024)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent.parent / "mui"))

from mui_testing import tiny_lm  # noqa: E402
from whitebox_eval.errors import WhiteboxError  # noqa: E402
from whitebox_eval.internals import Capture, Engine, batch_from_ids  # noqa: E402
from whitebox_eval.sae.encoding import SAE  # noqa: E402
from whitebox_eval.sae.training import topk_sae_gradients, train_topk_sae  # noqa: E402
from whitebox_eval.sae.fidelity import evaluate_fidelity  # noqa: E402
from whitebox_eval.sae.files import load_sae  # noqa: E402
from whitebox_eval.sae.text import chunk_text  # noqa: E402
from whitebox_eval.sae.training import block_output, collect_residuals  # noqa: E402


def _random_sae(d, f=16, k=4, seed=0, scale=0.3):
    g = torch.Generator().manual_seed(seed)
    return SAE(torch.randn(d, f, generator=g) * scale, torch.randn(f, generator=g) * 0.1,
               torch.randn(f, d, generator=g) * scale, torch.randn(d, generator=g) * 0.1, activation="topk", k=k)


def _hooked_logits(lm, ids, layer, fn=None):
    """Logits of one unpadded sequence, block ``layer``'s output [S, d] replaced by fn(h) (or recorded)."""
    got = {}

    def hook(_m, _a, out):
        h = out[0] if isinstance(out, tuple) else out
        got["h"] = h[0].clone()
        if fn is None:
            return None
        new = fn(h[0]).unsqueeze(0).to(h.dtype)
        return (new, *out[1:]) if isinstance(out, tuple) else new

    handle = lm.arch.blocks[layer].register_forward_hook(hook)
    try:
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([ids])).logits[0]
    finally:
        handle.remove()
    return logits, got["h"]


def test_truncated_collection_equals_the_full_forward_and_skips_the_blocks_above():
    lm = tiny_lm("llama")
    ids = torch.randint(3, 60, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    ran = []
    handle = lm.arch.blocks[2].register_forward_hook(lambda *a: ran.append(1))
    batch = batch_from_ids([ids[0].tolist(), ids[1, :6].tolist()])  # left-padded: the engine's layout
    try:
        for layer in (0, 1):
            trace = Engine(lm).run(batch, [Capture("resid", "all", [layer])], logits=False, stop_after=layer)
            h = batch.unpad(trace["resid"][:, 0], 1)  # right-padded, as ids and mask
            with torch.no_grad():
                full = lm.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[layer + 1]
            keep = mask.bool()
            torch.testing.assert_close(h[keep], full[keep], atol=1e-5, rtol=1e-5)
            assert torch.all(h[~keep] == 0)
    finally:
        handle.remove()
    assert len(ran) == 2  # only the two reference full forwards reached block 2
    with pytest.raises(WhiteboxError, match="no logits"):
        Engine(lm).run(batch, stop_after=0)
    with pytest.raises(WhiteboxError, match="stops after block 0"):
        Engine(lm).run(batch, [Capture("resid", "last", [1])], logits=False, stop_after=0)
    # collect_residuals: every real position but the first, padding out
    seqs = [list(range(3, 12)), list(range(20, 25))]
    x = collect_residuals(lm, 1, seqs, batch_size=2)
    assert x.shape == (8 + 4, lm.arch.d_model)
    ref = torch.cat([_hooked_logits(lm, s, 1)[1][1:] for s in sorted(seqs, key=len)])
    torch.testing.assert_close(torch.from_numpy(x).float(), ref, atol=2e-2, rtol=2e-3)  # float16 cache


def test_residuals_beyond_float16s_range_are_kept_in_float32(monkeypatch):
    """Gemma-3's residual stream holds values beyond float16's 65,504: cast to float16 they were
    inf, and the SAE trained on them. The collection keeps float32 then (the values exactly),
    float16 otherwise (half the memory)."""
    from whitebox_eval.sae import training as sae_training

    lm = tiny_lm("llama")
    seqs = [list(range(3, 12)), list(range(20, 25))]
    small = collect_residuals(lm, 1, seqs, batch_size=2)
    assert small.dtype == np.float16
    monkeypatch.setattr(sae_training, "block_output", lambda lm, ids, mask, layer: torch.full(
        (*ids.shape, lm.arch.d_model), 1.0e5) * (1 + torch.arange(ids.shape[1])[None, :, None]))
    big = collect_residuals(lm, 1, seqs, batch_size=2)
    assert big.dtype == np.float32 and np.isfinite(big).all()
    assert set(np.unique(big).tolist()) == {1.0e5 * (1 + i) for i in range(1, 9)}  # positions 1..8, exact


def test_fidelity_figures_equal_a_hand_computation():
    lm = tiny_lm("llama")
    layer = 1
    sae = _random_sae(lm.arch.d_model)
    g = torch.Generator().manual_seed(2)
    seqs = [torch.randint(3, 60, (n,), generator=g).tolist() for n in (7, 12, 4)]
    fid = evaluate_fidelity(lm, sae, layer, seqs, batch_size=2)  # padded batches
    xs, xhats, fs, ce = [], [], [], {"clean": [], "sae": [], "zero": []}
    for s in seqs:
        clean, h = _hooked_logits(lm, s, layer)
        x = h[1:].float()
        f = sae.encode(x)
        xh = sae.decode(f)
        xs.append(x), xhats.append(xh), fs.append(f)
        spliced, _ = _hooked_logits(lm, s, layer, lambda h, xh=xh: torch.cat([h[:1], xh.to(h.dtype)]))
        zeroed, _ = _hooked_logits(lm, s, layer, lambda h: torch.cat([h[:1], torch.zeros_like(h[1:])]))
        tgt = torch.tensor(s[2:])
        for name, lg in (("clean", clean), ("sae", spliced), ("zero", zeroed)):
            ce[name].append(torch.nn.functional.cross_entropy(lg[1:-1].float(), tgt, reduction="none"))
    x, xh, f = torch.cat(xs).double(), torch.cat(xhats).double(), torch.cat(fs)
    sse = ((x - xh) ** 2).sum(-1)
    tot = ((x - x.mean(0)) ** 2).sum(-1)
    c, s_, z = (float(torch.cat(ce[n]).mean()) for n in ("clean", "sae", "zero"))
    active = (f > 0).double().mean(0)
    assert fid["n_tokens"] == x.shape[0] == 6 + 11 + 3
    assert fid["n_predictions"] == 5 + 10 + 2
    assert fid["explained_variance"] == pytest.approx(float((1 - sse / tot).mean()), abs=1e-5)
    assert fid["explained_variance_pooled"] == pytest.approx(float(1 - sse.sum() / tot.sum()), abs=1e-5)
    assert fid["mse"] == pytest.approx(float(sse.mean() / x.shape[1]), rel=1e-5)
    assert fid["l0"] == pytest.approx(float((f > 0).sum(-1).double().mean()), rel=1e-6)
    assert fid["dead_fraction"] == pytest.approx(float((active == 0).double().mean()))
    assert fid["dense_fraction"] == pytest.approx(float((active > 0.1).double().mean()))
    assert fid["ce_loss_clean"] == pytest.approx(c, abs=1e-5)
    assert fid["ce_loss_sae"] == pytest.approx(s_, abs=1e-5)
    assert fid["ce_loss_zero"] == pytest.approx(z, abs=1e-5)
    assert fid["delta_loss"] == pytest.approx(s_ - c, abs=1e-5)
    assert fid["ce_loss_score"] == pytest.approx((z - s_) / (z - c), abs=1e-4)
    assert abs(fid["delta_loss"]) > 1e-3 and fid["ce_loss_zero"] != fid["ce_loss_clean"]  # the splices changed something
    assert "poor SAE" in fid["warning"]  # a random SAE is flagged


def test_hand_written_gradients_equal_autograd():
    g = torch.Generator().manual_seed(0)
    bsz, d, n_f, k, aux_k, coef = 16, 8, 32, 3, 4, 0.5
    x = torch.randn(bsz, d, generator=g) * 2 + 1
    mean = x.mean(0)
    leaves = [torch.randn(n_f, d, generator=g), 0.1 * torch.randn(n_f, generator=g), torch.randn(n_f, d, generator=g),
              torch.randn(d, generator=g)]
    dead = torch.tensor([1, 5, 7, 9, 11, 20, 25, 30])
    hand = [p.clone() for p in leaves]
    topk_sae_gradients(hand, x, mean, k, dead, aux_k=aux_k, aux_coef=coef)
    w_e, b_e, w_d, b_d = (p.clone().requires_grad_() for p in leaves)
    pre = (x - b_d) @ w_e.T + b_e
    idx = pre.detach().topk(k, -1).indices
    v = torch.relu(pre.gather(-1, idx))
    recon = (v.unsqueeze(-1) * w_d[idx]).sum(1) + b_d
    loss = (((recon - x) ** 2).sum(-1) / ((x - mean) ** 2).sum(-1)).mean()
    err = (x - recon).detach()
    pre_d = pre[:, dead]
    mask = torch.zeros_like(pre_d).scatter(-1, pre_d.detach().topk(aux_k, -1).indices, 1.0)
    loss = loss + coef * ((((torch.relu(pre_d) * mask) @ w_d[dead] - err) ** 2).sum(-1) / (err ** 2).sum(-1)).mean()
    loss.backward()
    for h, a in zip(hand, (w_e, b_e, w_d, b_d)):
        torch.testing.assert_close(h.grad, a.grad, atol=1e-4, rtol=1e-4)


def test_aux_loss_revives_dead_features():
    """16 features sit on true atoms; 16 have tiny encoder rows and never win the top-k: dead. Without
    the auxiliary loss they get no gradient and stay dead; with it (Gao et al.'s 1/32) most revive."""
    g = torch.Generator().manual_seed(1)
    d, n_true = 16, 32
    atoms = torch.randn(n_true, d, generator=g)
    atoms /= atoms.norm(dim=1, keepdim=True)
    support = torch.rand(3000, n_true, generator=g).argsort(dim=1)[:, :3]
    x = torch.zeros(3000, n_true).scatter_(1, support, 1 + torch.rand(3000, 3, generator=g)) @ atoms
    dec = torch.cat([atoms[:16], torch.randn(16, d, generator=g)])
    dec = dec / dec.norm(dim=1, keepdim=True)
    enc = dec.clone()
    enc[16:] *= 1e-3
    init = SAE(enc.T.contiguous(), torch.zeros(32), dec, torch.zeros(d), activation="topk", k=3)

    def dead(sae):
        return float(((sae.encode(x) > 0).sum(0) == 0).double().mean())

    assert dead(init) == 0.5
    kw = {"steps": 200, "lr": 5e-3, "seed": 0, "batch_size": 128, "dead_tokens": 1280, "init": init}
    off = train_topk_sae(x, 32, 3, aux_coef=0.0, **kw)
    on = train_topk_sae(x, 32, 3, aux_coef=1 / 32, **kw)
    assert dead(off) == 0.5 and off.metadata["steps_with_aux_loss"] == 0
    assert dead(on) <= 0.25 and on.metadata["steps_with_aux_loss"] > 0
    assert on.metadata["final_mse"] < 0.8 * off.metadata["final_mse"]
    assert on.metadata["dead_steps"] == 10  # 1280 tokens = 10 batches of 128
    # the window decides who is dead: one longer than the whole run never calls a feature dead, so nothing revives
    kw["dead_tokens"] = 200 * 128 + 1
    never = train_topk_sae(x, 32, 3, aux_coef=1 / 32, **kw)
    assert never.metadata["dead_steps"] == 201 and never.metadata["steps_with_aux_loss"] == 0 and dead(never) == 0.5
    with pytest.raises(WhiteboxError, match="dead_tokens"):
        train_topk_sae(x, 32, 3, dead_tokens=0, steps=1)


def test_text_chunks_dedup_and_held_out_tail(tmp_path):
    lm = tiny_lm("llama")
    (tmp_path / "a.txt").write_text("\n\n".join(["abc def " * 5, "abc def " * 5, "Question: 1+2=3. " * 4]))
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"text": f"line {i} " * 3, "id": i}) for i in range(9)))
    (tmp_path / "c.csv").write_text("q,a\nwhat is 2*3?,6\n")
    ch = chunk_text(lm.tokenizer, [tmp_path], context=8, heldout=0.25)
    assert all(len(c) == 8 for c in ch.train + ch.heldout)
    a = ch.sources[str(tmp_path / "a.txt")]
    # the repeated document is dropped (documents are stripped): 39 + 67 chars + 2 EOS = 108 tokens -> 13 chunks,
    # of which the repeats of "abc def " are dropped; a quarter of the rest (its end) is held out
    kept = a["n_train_chunks"] + a["n_heldout_chunks"]
    assert a["n_tokens"] == 108 and kept < 13 and a["n_heldout_chunks"] == round(0.25 * kept)
    assert len({tuple(c) for c in ch.train + ch.heldout}) == len(ch.train) + len(ch.heldout)
    assert ch.n_duplicate_chunks > 0  # "abc def abc def" chunks repeat
    assert ch.heldout and not {tuple(c) for c in ch.heldout} & {tuple(c) for c in ch.train}


def test_train_sae_cli_on_a_tiny_model(tmp_path, cli, monkeypatch):
    from whitebox_eval import models

    lm = tiny_lm("llama")
    monkeypatch.setattr(models, "load_model", lambda *a, **k: lm)
    text = tmp_path / "text.txt"
    g = torch.Generator().manual_seed(0)
    words = ["add ", "mul ", "12 ", "7 ", "=", "?", "Question: ", "A. ", "B. ", "what ", "is "]
    text.write_text("\n\n".join("".join(words[int(i)] for i in torch.randint(0, len(words), (60,), generator=g))
                                for _ in range(12)))
    code, out, err = cli(["mui", "train-sae", "--layer", "1", "--out", str(tmp_path / "sae"), "--text", str(text),
                          "--context", "32", "--heldout", "0.2", "--d-sae", "32", "--k", "4", "--steps", "30",
                          "--batch-size", "64", "--threads", "1"])
    assert code == 0, err
    assert "per token" in out and "CE loss score" in out and "dead in training (no activation in its last 10240 tokens)" in out
    rec = json.loads((tmp_path / "sae" / "fidelity.json").read_text())
    assert rec["heldout"]["n_tokens"] > 0 and rec["training"]["source"] == "text"
    assert set(rec["heldout"]) >= {"explained_variance", "explained_variance_pooled", "mse", "l0", "dead_fraction",
                                   "dense_fraction", "ce_loss_clean", "ce_loss_sae", "ce_loss_zero", "delta_loss",
                                   "ce_loss_score"}
    sae = load_sae(tmp_path / "sae")
    assert sae.k == 4 and sae.metadata["hook_layer"] == 1 and sae.metadata["training_text"] == "text"
    # the residuals were cached: a second run reads them back
    code, out, _ = cli(["mui", "train-sae", "--layer", "1", "--out", str(tmp_path / "sae2"), "--text", str(text),
                        "--context", "32", "--heldout", "0.2", "--d-sae", "32", "--k", "4", "--steps", "5",
                        "--batch-size", "64", "--threads", "1"])
    assert code == 0 and "read from the cache" in out
    # sae-fidelity measures an existing SAE on the same held-out chunks
    code, out, err = cli(["mui", "sae-fidelity", "--sae", str(tmp_path / "sae"), "--text", str(text), "--context", "32",
                          "--heldout", "0.2", "--threads", "1", "--json", str(tmp_path / "fid.json")])
    assert code == 0, err
    again = json.loads((tmp_path / "fid.json").read_text())
    assert again["n_tokens"] == rec["heldout"]["n_tokens"]
    assert again["explained_variance"] == pytest.approx(rec["heldout"]["explained_variance"], abs=1e-6)
    assert again["ce_loss_sae"] == pytest.approx(rec["heldout"]["ce_loss_sae"], abs=1e-6)


@pytest.mark.slow
def test_train_sae_on_the_bundled_model_with_a_tiny_budget(tmp_path, cli, shared_datasets):
    """SmolLM2-135M layer 15 on a little of wikitext: the run completes, the figures are sane and the
    truncated collection equals transformers' own hidden state at that layer."""
    from whitebox_eval.models import load_model

    text = shared_datasets / "wikitext2" / "valid.txt"
    code, _, err = cli(["mui", "train-sae", "--layer", "15", "--out", str(tmp_path / "sae"), "--text", str(text),
                          "--tokens", "4096", "--heldout", "0.01", "--eval-tokens", "512", "--d-sae", "1024",
                          "--steps", "50", "--batch-size", "256"])
    assert code == 0, err
    fid = json.loads((tmp_path / "sae" / "fidelity.json").read_text())["heldout"]
    assert 0.0 < fid["explained_variance"] < 1.0 and fid["ce_loss_zero"] > fid["ce_loss_sae"] > 0
    lm = load_model("smollm2-135m")
    ids = torch.tensor([lm.tokenizer("The history of the printing press begins in")["input_ids"]])
    with torch.no_grad():
        full = lm.model(input_ids=ids, output_hidden_states=True).hidden_states[16]
    torch.testing.assert_close(block_output(lm, ids, None, 15), full, atol=1e-4, rtol=1e-4)


def test_poor_figures_judge_each_threshold_and_the_dead_share_only_on_running_text():
    """One judgment for every SAE figure (THRESHOLDS); the dead share counts only with judge_dead
    (held-out running text) and only where each feature could fire about 10 times."""
    from whitebox_eval.sae.fidelity import THRESHOLDS, poor_figures

    good = {"explained_variance": 0.84, "delta_loss": 0.15, "ce_loss_score": 0.99, "dead_fraction": 0.03,
            "n_tokens": 16320, "l0": 32.0, "d_sae": 4096}
    assert poor_figures(good) == []
    for key, bad in (("explained_variance", 0.69), ("delta_loss", 0.31), ("ce_loss_score", 0.94)):
        assert len(poor_figures({**good, key: bad})) == 1, key
    assert len(poor_figures({**good, "explained_variance": float("nan")})) == 1  # a missing figure is not a pass
    dead = {**good, "dead_fraction": THRESHOLDS["dead_fraction"] + 0.07}
    assert poor_figures(dead) == ["57% of features never active"]
    assert poor_figures(dead, judge_dead=False) == []  # a task's tokens: reported, not judged
    few = {**dead, "n_tokens": 1000}  # 1000 * 32 < 10 * 4096: too few activations to call a feature dead
    assert poor_figures(few) == []


def test_hub_text_is_streamed_once_to_a_budget_then_read_as_a_local_file(tmp_path, monkeypatch):
    """hf:DATASET[:CONFIG][@SPLIT]: rows streamed up to a character budget, exported as JSON lines under
    the cache root, reused on the next call, then chunked exactly as that local file would be."""
    from whitebox_eval.sae import text as sae_text

    monkeypatch.setenv("WHITEBOX_EVAL_CACHE", str(tmp_path / "cache"))
    rows = [{"text": f"Article {i}. " + "word " * 40, "id": i} for i in range(50)] + [{"text": "  "}]
    calls = []

    def fake_load_dataset(name, config, *, split, streaming):
        calls.append((name, config, split, streaming))
        return iter(rows)

    path = sae_text.hub_text("hf:org/wiki:raw@validation", max_chars=1000, load_dataset=fake_load_dataset)
    assert calls == [("org/wiki", "raw", "validation", True)]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    per_row = len(rows[0]["text"].strip())
    assert len(lines) == -(-1000 // per_row) and lines[0] == {"text": rows[0]["text"].strip()}  # stops at the budget
    assert sae_text.hub_text("hf:org/wiki:raw@validation", max_chars=1000, load_dataset=fake_load_dataset) == path
    assert len(calls) == 1  # reused
    assert sae_text.hub_text("hf:org/wiki", max_chars=1000,
                             load_dataset=fake_load_dataset).name.endswith("-default-train-1000.jsonl")
    lm = tiny_lm("llama")
    # chunk_text exports under the default budget (no token budget given); the export is made here first
    sae_text.hub_text("hf:org/wiki:raw@validation", max_chars=sae_text.HUB_DEFAULT_CHARS, load_dataset=fake_load_dataset)
    via_hub = chunk_text(lm.tokenizer, ["hf:org/wiki:raw@validation"], context=16, heldout=0.2)  # default budget
    (export,) = via_hub.sources
    assert len(Path(export).read_text().splitlines()) == 50  # every row with text, under the default budget
    local = tmp_path / "same.jsonl"
    local.write_text(Path(export).read_text())
    via_file = chunk_text(lm.tokenizer, [local], context=16, heldout=0.2)
    assert via_hub.train and via_hub.train == via_file.train and via_hub.heldout == via_file.heldout

    def failing(*a, **k):
        raise ConnectionError("no network")

    with pytest.raises(WhiteboxError, match="Offline, download the text"):
        sae_text.hub_text("hf:org/other", max_chars=10, load_dataset=failing)
    assert not list((tmp_path / "cache").rglob("*.partial"))


def test_fidelity_under_an_edit_is_the_edited_models():
    """``evaluate_fidelity(edits=...)`` (a mui run under ``--edit``): every figure equals the unedited
    evaluation of a copy with the edit written into its weights (heads 1.0 and 1.2 zeroed in o_proj)."""
    import copy

    from whitebox_eval.internals.requests import ScaleHeads

    lm = tiny_lm("llama")
    sae = _random_sae(lm.arch.d_model)
    seqs = [[5, 9, 17, 33, 2, 41, 7, 12], [3, 8, 21, 30, 11], [4, 6, 1, 9, 9, 2]]
    d = lm.arch.head_dim
    from dataclasses import replace

    from whitebox_eval.models.architectures import Architecture

    ref = copy.deepcopy(lm.model)
    zeroed = replace(lm, model=ref, arch=Architecture.of(ref))  # the engine reads the copy's own modules
    with torch.no_grad():
        w = ref.model.layers[1].self_attn.o_proj.weight
        w[:, 0:d] = 0
        w[:, 2 * d:3 * d] = 0
    edited = evaluate_fidelity(lm, sae, 2, seqs, batch_size=2, edits=[ScaleHeads(1, (0, 2), 0.0)])
    want = evaluate_fidelity(zeroed, sae, 2, seqs, batch_size=2)
    plain = evaluate_fidelity(lm, sae, 2, seqs, batch_size=2)
    for key in ("ce_loss_clean", "ce_loss_sae", "ce_loss_zero", "explained_variance", "mse", "l0"):
        assert edited[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), key
    assert edited["ce_loss_clean"] != pytest.approx(plain["ce_loss_clean"], rel=1e-6)  # the edit mattered
