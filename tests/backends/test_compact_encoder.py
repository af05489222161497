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
        torch.manual_seed(5)  # the embeddings' dropout
        ours.dropout_seed.fill_(41)  # the residual sites' masks (the forward makes it 42)
        ours(ids).sum().backward()
        grads.append(ours.layers[1].up.weight.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def _dropout_off(model: CompactEncoder) -> None:
    model.dropout = 0.0
    for layer in model.layers:
        layer.dropout = 0.0


def test_fused_residual_sites_and_erf_gelu_match_the_unfused_layers(monkeypatch) -> None:
    """The fused operator and the A&S GELU change how, not what: with dropout off the logits and
    every gradient equal those of F.dropout + nn.LayerNorm + F.gelu layers (the fused model
    compiled, aot_eager on a CPU, so that erf_gelu runs: uncompiled it is F.gelu)."""
    import fitbench.backends.torch.compact_encoder as ce

    fused, _ = _pair(TINY_BERT)
    monkeypatch.setattr(ce, "FUSED_RESIDUAL_NORM", False)
    monkeypatch.setattr(ce, "CHEAP_ERF_GELU", False)
    plain = CompactEncoder(TINY_BERT)
    plain.load_state_dict(fused.state_dict())
    assert all(layer.fused_norm for layer in fused.layers) and not any(
        layer.fused_norm for layer in plain.layers
    )
    ids = torch.randint(0, TINY_BERT.vocab_size, (2, 9), generator=torch.Generator().manual_seed(8))
    compiled = torch.compile(fused, backend="aot_eager")
    for model, run in ((fused, compiled), (plain, plain)):
        model.train()
        _dropout_off(model)
        run(ids).square().sum().backward()
    torch.testing.assert_close(compiled(ids), plain(ids), rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(fused.named_parameters(), plain.named_parameters(), strict=True):
        # the word embeddings' gradient sums rows in an order that differs with the thread count
        # and the PyTorch release (a 16-core host with PyTorch 2.11 needed more than 1e-5 of the
        # largest element there): a wrong gradient would still be off by its own size
        scale = b.grad.abs().max().item()
        atol = (1e-4 if name == "word.weight" else 1e-5) * scale
        torch.testing.assert_close(
            a.grad, b.grad, rtol=1e-4, atol=atol, msg=lambda m, name=name: f"{name}: {m}"
        )


def test_three_qkv_products_compute_what_one_product_and_its_views_compute(monkeypatch) -> None:
    """THREE_QKV_PRODUCTS changes where q, k and v live, not their values: the same logits and
    the same gradients (the qkv weight's included) as the one product whose views they were."""
    import fitbench.backends.torch.compact_encoder as ce

    one, _ = _pair(TINY_BERT)
    monkeypatch.setattr(ce, "THREE_QKV_PRODUCTS", True)
    three = CompactEncoder(TINY_BERT)
    three.load_state_dict(one.state_dict())
    assert all(layer.three_qkv_products for layer in three.layers)
    assert not any(layer.three_qkv_products for layer in one.layers)
    ids = torch.randint(0, TINY_BERT.vocab_size, (2, 9), generator=torch.Generator().manual_seed(5))
    for model in (one, three):
        model.train()
        _dropout_off(model)
        model(ids).square().sum().backward()
    torch.testing.assert_close(three(ids), one(ids), rtol=1e-5, atol=1e-6)
    grads = 0
    for (name, a), (_, b) in zip(three.named_parameters(), one.named_parameters(), strict=True):
        scale = b.grad.abs().max().item()
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
        grads += "qkv" in name and b.grad.abs().sum().item() > 0
    assert grads == 2 * TINY_BERT.num_layers  # each layer's qkv weight and bias got a gradient


def test_each_training_step_draws_new_residual_masks() -> None:
    ours, _ = _pair(TINY_BERT)
    ours.train()
    ids = torch.randint(0, TINY_BERT.vocab_size, (2, 9), generator=torch.Generator().manual_seed(3))
    before = int(ours.dropout_seed)
    torch.manual_seed(0)  # the same embedding and attention dropouts (PyTorch's generator) each time
    a = ours(ids)
    torch.manual_seed(0)
    b = ours(ids)
    assert int(ours.dropout_seed) == before + 2
    assert not torch.allclose(a, b)
    ours.dropout_seed.fill_(before)  # the same counter gives the same masks
    torch.manual_seed(0)
    torch.testing.assert_close(ours(ids), a)
    ours.eval()
    with torch.no_grad():
        ours(ids)
    assert int(ours.dropout_seed) == before + 1  # evaluation draws nothing


def test_a_decoder_is_one_clear_error():
    with pytest.raises(FitbenchError, match="BERT-style encoders"):
        check_bert_layout(TINY_LLAMA)


def test_a_bf16_residual_stream_stays_bf16_and_trains_like_the_fp32_stream() -> None:
    """residual_dtype = bf16 (the tuned step's 16-bit stream): every layer hands the next a bf16
    stream, and under bf16 autocast the logits, the loss and the gradients stay within bf16's
    rounding of those of autocast's fp32 stream (same weights, same dropout masks)."""
    fp32_stream, _ = _pair(TINY_BERT)
    bf16_stream = CompactEncoder(TINY_BERT)
    bf16_stream.load_state_dict(fp32_stream.state_dict())
    bf16_stream.residual_dtype = torch.bfloat16
    ids = torch.randint(0, TINY_BERT.vocab_size, (4, 16), generator=torch.Generator().manual_seed(5))
    labels = torch.tensor([0, 1, 1, 0])
    streams, losses, logits = {}, {}, {}
    for name, model in (("fp32", fp32_stream), ("bf16", bf16_stream)):
        model.train()
        model.dropout_seed.fill_(7)
        seen: list[torch.dtype] = []
        hooks = [
            layer.register_forward_hook(lambda _m, _i, out, seen=seen: seen.append(out[0].dtype))
            for layer in model.layers
        ]
        torch.manual_seed(0)  # the embeddings' and attention's dropouts
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(ids, torch.zeros_like(ids))
            loss = torch.nn.functional.cross_entropy(out.float(), labels)
        loss.backward()
        for hook in hooks:
            hook.remove()
        streams[name], losses[name], logits[name] = seen, loss.item(), out.float()
    assert streams["fp32"] == [torch.float32] * TINY_BERT.num_layers
    assert streams["bf16"] == [torch.bfloat16] * TINY_BERT.num_layers
    torch.testing.assert_close(logits["bf16"], logits["fp32"], rtol=0.02, atol=5e-3)
    assert abs(losses["bf16"] - losses["fp32"]) < 0.01 * abs(losses["fp32"])
    for (name, a), (_, b) in zip(bf16_stream.named_parameters(), fp32_stream.named_parameters(), strict=True):
        cosine = torch.nn.functional.cosine_similarity(a.grad.flatten(), b.grad.flatten(), dim=0)
        assert cosine > 0.995, name
