"""The tuned mode's compact encoder computes what transformers' BertForSequenceClassification
computes: same parameter count, and the same logits and gradients once the same weights are loaded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fitbench.backends.torch.compact_encoder import CompactEncoder, check_bert_layout  # noqa: E402
from fitbench.backends.torch.models import build_encoder, count_parameters  # noqa: E402
from fitbench.errors import FitbenchError  # noqa: E402
from fitbench.workloads.arch import TransformerArch  # noqa: E402
from fitbench.workloads.presets import BERT_BASE, TINY_BERT, TINY_LLAMA  # noqa: E402

pytestmark = pytest.mark.torch

NO_POOLER = TransformerArch(**{**TINY_BERT.__dict__, "pooler": False, "num_labels": 3})


def _copy_from_bert(ours: CompactEncoder, bert: torch.nn.Module) -> None:
    """Load transformers' BERT weights into the compact layout (q, k, v stacked)."""
    sd = bert.state_dict()
    e = "bert.embeddings."
    new = {
        "word.weight": sd[e + "word_embeddings.weight"],
        "position.weight": sd[e + "position_embeddings.weight"],
        "token_type.weight": sd[e + "token_type_embeddings.weight"],
        "embed_norm.weight": sd[e + "LayerNorm.weight"],
        "embed_norm.bias": sd[e + "LayerNorm.bias"],
        "classifier.weight": sd["classifier.weight"],
        "classifier.bias": sd["classifier.bias"],
    }
    if ours.pooler is not None:
        new["pooler.weight"] = sd["bert.pooler.dense.weight"]
        new["pooler.bias"] = sd["bert.pooler.dense.bias"]
    for i in range(len(ours.layers)):
        p, o = f"bert.encoder.layer.{i}.", f"layers.{i}."
        for kind in ("weight", "bias"):
            new[o + "qkv." + kind] = torch.cat(
                [sd[p + f"attention.self.{n}.{kind}"] for n in ("query", "key", "value")]
            )
            new[o + "out." + kind] = sd[p + "attention.output.dense." + kind]
            new[o + "attn_norm." + kind] = sd[p + "attention.output.LayerNorm." + kind]
            new[o + "up." + kind] = sd[p + "intermediate.dense." + kind]
            new[o + "down." + kind] = sd[p + "output.dense." + kind]
            new[o + "mlp_norm." + kind] = sd[p + "output.LayerNorm." + kind]
    missing, unexpected = ours.load_state_dict(new, strict=True)
    assert not missing and not unexpected


def _pair(arch: TransformerArch) -> tuple[CompactEncoder, torch.nn.Module]:
    torch.manual_seed(0)
    bert, _ = build_encoder(arch, attention="sdpa", device=torch.device("cpu"), dtype=torch.float32)
    ours = CompactEncoder(arch)
    _copy_from_bert(ours, bert)
    return ours, bert


@pytest.mark.parametrize("arch", [TINY_BERT, NO_POOLER, BERT_BASE], ids=["tiny", "no-pooler", "bert-base"])
def test_parameter_count_equals_the_architecture_and_transformers(arch):
    with torch.device("meta"):
        ours = CompactEncoder(arch)
    assert count_parameters(ours) == arch.param_count()
    if arch is not BERT_BASE:
        _, bert = _pair(arch)
        assert count_parameters(bert) == arch.param_count()


@pytest.mark.parametrize("arch", [TINY_BERT, NO_POOLER], ids=["tiny", "no-pooler"])
def test_logits_equal_transformers_bert_with_the_same_weights(arch):
    ours, bert = _pair(arch)
    ours.eval(), bert.eval()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, arch.vocab_size, (3, 17), generator=gen)
    types = torch.randint(0, max(arch.type_vocab_size, 1), (3, 17), generator=gen)
    with torch.no_grad():
        expected = bert(input_ids=ids, token_type_ids=types).logits
        got = ours(ids, types)
        assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)
        # Without token types BERT uses segment 0 everywhere.
        assert torch.allclose(ours(ids), bert(input_ids=ids).logits, atol=1e-5, rtol=1e-4)


def test_gradients_equal_transformers_bert_with_dropout_off():
    ours, bert = _pair(TINY_BERT)
    for module in (ours, bert):
        module.train()
        for m in module.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    ours.dropout = 0.0
    for layer in ours.layers:
        layer.dropout = 0.0
    ids = torch.randint(0, TINY_BERT.vocab_size, (2, 9), generator=torch.Generator().manual_seed(2))
    ours(ids).square().sum().backward()
    bert(input_ids=ids).logits.square().sum().backward()
    got = ours.layers[0].qkv.weight.grad
    expected = torch.cat(
        [
            bert.bert.encoder.layer[0].attention.self.__getattr__(n).weight.grad
            for n in ("query", "key", "value")
        ]
    )
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)
    assert torch.allclose(
        ours.word.weight.grad, bert.bert.embeddings.word_embeddings.weight.grad, atol=1e-6, rtol=1e-4
    )


def test_dropout_is_active_in_training_and_off_in_eval():
    ours, _ = _pair(TINY_BERT)
    ids = torch.randint(0, TINY_BERT.vocab_size, (2, 9), generator=torch.Generator().manual_seed(3))
    ours.train()
    torch.manual_seed(0)
    a = ours(ids)
    torch.manual_seed(1)
    b = ours(ids)
    assert not torch.allclose(a, b)
    ours.eval()
    with torch.no_grad():
        assert torch.equal(ours(ids), ours(ids))


def test_checkpointing_gives_the_same_gradients():
    ours, _ = _pair(TINY_BERT)
    ours.train()
    ids = torch.randint(0, TINY_BERT.vocab_size, (2, 9), generator=torch.Generator().manual_seed(4))
    grads = []
    for flag in (False, True):
        ours.zero_grad()
        ours.checkpointing = flag
        torch.manual_seed(5)
        ours(ids).sum().backward()
        grads.append(ours.layers[1].up.weight.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_a_decoder_is_one_clear_error():
    with pytest.raises(FitbenchError, match="BERT-style encoders"):
        check_bert_layout(TINY_LLAMA)
