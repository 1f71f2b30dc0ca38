"""What fine-tuning takes from a checkpoint (gpt1.checkpoints.transfer), unit by unit: which rows and blocks, for each
n_transfer, and for the LSTM and no-pre-training ablations."""

from dataclasses import replace

import pytest
import torch

from gpt1.app.config import CheckpointModelConfig
from gpt1.app.model_group import model_config
from gpt1.checkpoints.transfer import transfer, transferred_state
from gpt1.core.errors import ConfigError
from gpt1.model.decoder import GPT
from gpt1.model.lstm import LSTM, LSTMConfig

TINY = replace(model_config("tiny"), vocab_size=100)


@pytest.fixture
def ref() -> GPT:
    torch.manual_seed(0)
    return GPT(TINY)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("n_transfer", [-1, 0, 1, 2])
def test_n_transfer_takes_the_embeddings_and_the_first_blocks(ref, n_transfer):
    torch.manual_seed(1)
    model = transfer(ref, CheckpointModelConfig(), pretrained=True, n_transfer=n_transfer)
    taken = TINY.n_layer if n_transfer == -1 else n_transfer
    mine, theirs = model.state_dict(), ref.state_dict()
    assert same(mine["tokens_embed.weight"], theirs["tokens_embed.weight"])
    assert same(mine["positions_embed.weight"], theirs["positions_embed.weight"])
    for i in range(TINY.n_layer):
        block = [k for k in theirs if k.startswith(f"h.{i}.")]
        matrices = [k for k in block if k.endswith("weight") and ".ln_" not in k]  # (LayerNorms start at 1 anyway)
        assert matrices and all(same(mine[k], theirs[k]) == (i < taken) for k in matrices), i
    assert set(transferred_state(ref, n_transfer)) == {
        k for k in theirs if not k.startswith("h.") or int(k.split(".")[1]) < taken
    }


def test_n_transfer_out_of_range_names_the_blocks(ref):
    with pytest.raises(ConfigError, match=r"n_transfer=3: choose -1 \(all blocks\) or 0..2"):
        transfer(ref, CheckpointModelConfig(), pretrained=True, n_transfer=3)


def test_dropouts_change_and_the_padding_rows_stay_fresh(ref):
    model = transfer(ref, CheckpointModelConfig(resid_pdrop=0.3, pad_vocab_to_multiple=64), pretrained=True)
    assert model.config.resid_pdrop == 0.3 and model.tokens_embed.weight.shape[0] == 128
    assert same(model.tokens_embed.weight[:100], ref.tokens_embed.weight[:100])
    lstm = LSTM(replace(LSTMConfig(), vocab_size=100))
    with pytest.raises(ConfigError, match="model.attn_pdrop: the checkpoint's LSTM has no such setting"):
        transfer(lstm, CheckpointModelConfig(attn_pdrop=0.2), pretrained=True)
    # the recipe's defaults apply where the LSTM has the setting (its dropouts), and are no error where it has not
    undropped = LSTM(replace(LSTMConfig(), vocab_size=100, embd_pdrop=0.0, resid_pdrop=0.0))
    model = transfer(undropped, CheckpointModelConfig(), pretrained=True)
    assert model.config.embd_pdrop == model.config.resid_pdrop == 0.1


def test_the_lstm_takes_the_token_embeddings_only(ref):
    lstm = transfer(ref, LSTMConfig(), pretrained=True)
    assert isinstance(lstm, LSTM) and lstm.config.n_embd == TINY.n_embd and lstm.config.n_ctx == TINY.n_ctx
    assert same(lstm.tokens_embed.weight, ref.tokens_embed.weight)


def test_no_pretraining_takes_the_vocabulary_only(ref):
    model = transfer(ref, CheckpointModelConfig(), pretrained=False)
    assert model.config == replace(ref.config, embd_dropout="table") and not same(
        model.tokens_embed.weight, ref.tokens_embed.weight
    )
    small = transfer(ref, model_config("small"), pretrained=False)
    assert small.config.vocab_size == 100 and small.config.n_embd == model_config("small").n_embd
    with pytest.raises(
        ConfigError,
        match="a model preset \\(model=NAME\\) of the checkpoint.s own type \\(gpt\\) is for init_from=random",
    ):
        transfer(ref, model_config("small"), pretrained=True)
