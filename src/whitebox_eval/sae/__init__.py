"""Sparse autoencoders (paper 001 sec. 2.1.2, eq. 4-6, 9): encoding, SAELens files, TopK
training on real text, the field's fidelity figures, and a training study with its own run
folder (:mod:`.study`) that feature MUI reads.

* ``sae.encoding``: the SAE (ReLU, TopK, JumpReLU), feature scores, reconstruction statistics;
* ``sae.files``: SAELens' layout, Gemma Scope's params.npz, Llama Scope's hyperparams.json;
* ``sae.sources``: an SAE by folder, ``hf:ORG/REPO/PATH`` or ``saelens:RELEASE/SAE_ID`` (the hub cache
  offline), with its Neuronpedia links;
* ``sae.sets``: the SAEs a feature-MUI study reads, each at its hook point (the hook table, strictly);
* ``sae.text``: training text (files, folders, hub) in chunks with a held-out end;
* ``sae.training``: the TopK trainer and training on a model's residual stream;
* ``sae.fidelity``: explained variance, MSE, L0, dead/dense shares, spliced next-token loss;
* ``sae.study``: ``studies.sae``: an SAE trained into a run folder (a reproduce child);
* ``sae.commands``: ``whitebox-eval mui train-sae`` and ``mui sae-fidelity``.
"""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.sae.encoding": ["SAE", "ReconstructionStats", "reconstruction_mse", "sae_feature_scores",
                                   "sae_feature_scores_by_layer"],
    "whitebox_eval.sae.files": ["load_sae", "save_sae"],
    "whitebox_eval.sae.sets": ["SAESet", "load_sae_set"],
    "whitebox_eval.sae.sources": ["resolve_sae"],
    "whitebox_eval.sae.training": ["train_topk_sae"],
})
