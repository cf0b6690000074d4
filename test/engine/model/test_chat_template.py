"""Qwen prompts are the chat template's tokens (engine/model/chat_template.py, the Qwen families'
prompt_ids / question_ids): the frame's prefix + a question equal transformers'
apply_chat_template ids of one user turn (images, instruction, the question on its own line)
with the template's generation prompt, token for token, also with a tokenizer whose merges
join "Ġ" and "Ċ" (Qwen's pre-tokenizer: the instruction's trailing space and the question's
newline are one token there); a folder's shipped template (a Qwen3.5-like one opening an empty
thinking block) sets the head and tail; the engine's answer equals transformers' generate on
the template's ids in isolated and oxygen modes."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from oxygen_ros.engine.config import PRESETS, EngineConfig
from oxygen_ros.engine.core.engine import Engine
from oxygen_ros.engine.core.intake import Intake
from oxygen_ros.engine.core.synthetic import SyntheticStream
from oxygen_ros.engine.model.chat_template import template_ids, with_chat_template
from oxygen_ros.engine.model.prompt import format_prompt

QUESTIONS = ("what happened?", "Is the cup on the left?", " 3 cubes", "\nwhere?")
# Qwen3.5-like: the generation prompt opens an empty thinking block (what Qwen3's template
# renders with enable_thinking=False; a checkpoint's own template decides, and is what is used)
THINKING_TEMPLATE_TAIL = "<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n"


def _template(qwen_chat_template: str, thinking: bool) -> str:
    if not thinking:
        return qwen_chat_template
    return qwen_chat_template.replace("<|im_start|>assistant\\n", THINKING_TEMPLATE_TAIL)


def _prefix_ids(mc, intake: Intake, obs) -> list[int]:
    """The frame's prefix as the family's model lays it out (built on the meta device)."""
    from oxygen_ros.engine.families.qwen35.checkpoint import build
    from oxygen_ros.engine.families.qwen3vl.model import Qwen3VLModel

    with torch.device("meta"):
        model = build(mc) if mc.family == "qwen35" else Qwen3VLModel(mc)
    return model.prefix_ids(obs.images.shape[0], intake.action_prompt(obs, EngineConfig()))


@pytest.mark.parametrize("qwen_merges", [False, True], ids=["tiny-bpe", "qwen-merges"])
@pytest.mark.parametrize("preset,thinking", [("xr0-tiny", False), ("starvla-tiny-e4", False),
                                             ("qwen35-tiny", True)])
def test_prefix_and_question_are_the_chat_templates_ids(qwen_chat, qwen_chat_template, preset,
                                                        thinking, qwen_merges):
    make_tokenizer, render_ids = qwen_chat
    base = PRESETS[preset]
    tok, fast = make_tokenizer(base.vocab_size, qwen_merges=qwen_merges)
    template = _template(qwen_chat_template, thinking)
    tok.chat_template = template
    mc = with_chat_template(base, tok)
    intake = Intake(mc, tok, num_blocks=1 << 20, reserved_blocks=0, device=torch.device("cpu"))
    obs = SyntheticStream(mc).frame(0)
    n = obs.images.shape[0]
    prefix = _prefix_ids(mc, intake, obs)
    instruction = format_prompt(obs.instruction, obs.state, bins=mc.state_bins) \
        + "<|oft|>" * len(mc.qwen.action_query_ids)
    for question in QUESTIONS:
        want = render_ids(fast, n, mc.image_grid_tokens, [instruction, "\n" + question],
                          template=template)
        assert prefix + intake.encode_suffix(question) == want, question
    if thinking:
        assert fast.decode(list(mc.qwen.tail_ids)).endswith("<think>\n\n</think>\n\n")


def test_the_split_tokenises_the_same_apart_and_joined(qwen_chat):
    """The case of the issue: tokenised apart, "...Action: " and "\\nwhat" give 'Ġ', 'Ċ' where
    the joined text gives 'ĠĊ'; the family's prompt and question ids are the joined text's."""
    from oxygen_ros.engine.config.family_registry import family_of

    mc = PRESETS["xr0-tiny"]
    family = family_of(mc)
    tok, _ = qwen_chat[0](mc.vocab_size, qwen_merges=True)
    text = format_prompt("pick up the cup", [0.1, -0.5, 0.9])
    question = "what happened?"
    joined = tok.encode(text + "\n" + question)
    naive = tok.encode(text) + tok.encode("\n" + question)
    assert naive != joined and tok.tok.id_to_token(joined[len(tok.encode(text)) - 1]) == "ĠĊ"
    ours = family.prompt_ids(mc, tok, text) + family.question_ids(mc, tok, question)
    assert ours == joined + list(mc.qwen.tail_ids)


def test_a_template_that_does_not_fit_the_layout_is_refused(qwen_chat, qwen_chat_template):
    tok, _ = qwen_chat[0](PRESETS["xr0-tiny"].vocab_size)
    bad = qwen_chat_template.replace("{{ c.text }}", "{{ c.text + ' ' }}")
    with pytest.raises(ValueError, match="between a user turn's image and texts"):
        template_ids(tok, bad)


def test_folder_with_a_thinking_template_lays_prompts_out_by_it(qwen_chat, qwen_chat_template,
                                                                tmp_path, capsys):
    """A Qwen3.5 folder whose tokenizer ships a template opening an empty thinking block: the
    loader takes the head and tail from it, the engine's ids are the template's, and
    oxygen-inspect says what it renders."""
    from oxygen_ros.cli import inspect_checkpoint as checkpoint_cli
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.families.loader import open_checkpoint
    from oxygen_ros.engine.families.qwen35.checkpoint import save_qwen35_folder

    base = PRESETS["qwen35-tiny"]
    tok, fast = qwen_chat[0](base.vocab_size, qwen_merges=True)
    folder = tmp_path / "qwen35"
    save_qwen35_folder(init_model(base, seed=0), folder)
    tok.save(folder)
    template = _template(qwen_chat_template, thinking=True)
    (folder / "chat_template.jinja").write_text(template)
    ck = open_checkpoint(folder)
    mc = ck.config
    assert mc.qwen.tail_ids != base.qwen.tail_ids and ck.model.config == mc
    engine = Engine(mc, EngineConfig(), model=ck.model, tokenizer=ck.tokenizer)
    obs = SyntheticStream(mc).frame(0)
    n = obs.images.shape[0]
    prefix = ck.model.prefix_ids(n, engine.intake.action_prompt(obs, engine.config))
    want = qwen_chat[1](fast, n, mc.image_grid_tokens,
                        [format_prompt(obs.instruction, obs.state, bins=mc.state_bins),
                         "\nwhat happened?"], template=template)
    assert prefix + engine.check_question("what happened?") == want
    assert checkpoint_cli.main([str(folder)]) == 0
    out = capsys.readouterr().out
    assert "chat template   the tokenizer's chat template" in out and "<think>" in out


@pytest.fixture(scope="module")
def merges_pair(make_qwen3vl_pair, qwen_chat, qwen_chat_template):
    """xr0-tiny laid out by the chat template on the Qwen-merges tokenizer: transformers' model,
    ours, the config, (our tokenizer, transformers')."""
    tok, fast = qwen_chat[0](PRESETS["xr0-tiny"].vocab_size, qwen_merges=True)
    tok.chat_template = qwen_chat_template
    # its digits are single tokens: 32 joints' state needs more than the preset's 128
    mc = with_chat_template(dataclasses.replace(PRESETS["xr0-tiny"], max_prompt_tokens=192), tok)
    hf, ours = make_qwen3vl_pair(mc)
    return hf, ours, mc, tok, fast


@pytest.mark.parametrize("mode", ["isolated", "oxygen"])
def test_engine_answer_equals_transformers_on_the_templates_ids(merges_pair, qwen_chat,
                                                                qwen_chat_template, mode,
                                                                monkeypatch):
    """A question asked on a frame: the engine's greedy tokens and first-step logits equal
    transformers' generate on the ids apply_chat_template gives the same conversation (with the
    Qwen-merges tokenizer)."""
    from oxygen_ros.engine.families.qwen3vl.model import patchify

    hf, ours, mc, tok, fast = merges_pair
    logits: list[torch.Tensor] = []
    lm_logits = ours.lm_logits
    monkeypatch.setattr(ours, "lm_logits", lambda h: logits.append(lm_logits(h)) or logits[-1])
    engine = Engine(mc, EngineConfig(mode=mode, decode_steps_per_frame=2, max_decode_steps=6,
                                     denoise_steps=1, memory_every_n_frames=0),
                    model=ours, tokenizer=tok)
    stream = SyntheticStream(mc)
    question = "what happened?"
    rid = engine.ask(question)
    outs = [engine.step(stream.frame(0))] + list(engine.drain(stream.frame))
    tokens = [t for o in outs for u in o.updates if u.id == rid for t in u.new_tokens]
    obs = stream.frame(0)
    n = obs.images.shape[0]
    ids = qwen_chat[1](fast, n, mc.image_grid_tokens,
                       [format_prompt(obs.instruction, obs.state, bins=mc.state_bins),
                        "\n" + question], template=qwen_chat_template)
    pix = torch.from_numpy(obs.images).permute(0, 3, 1, 2).float() / 255 * 2 - 1
    side = mc.vision.image_size // mc.vision.patch_size
    ids_t = torch.tensor([ids])
    with torch.no_grad():
        gen = hf.generate(input_ids=ids_t, pixel_values=patchify(pix, mc.vision.patch_size, 2, 2),
                          image_grid_thw=torch.tensor([[1, side, side]] * n),
                          mm_token_type_ids=(ids_t == mc.qwen.image_token_id).int(),
                          max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0,
                          output_logits=True, return_dict_in_generate=True)
    want = gen.sequences[0, len(ids):].tolist()
    first = logits[0][-1] if logits[0].dim() == 2 else logits[0]
    torch.testing.assert_close(first.float(), gen.logits[0][0], atol=1e-4, rtol=0)
    assert tokens and tokens == want[:len(tokens)]
    assert len(tokens) == 6 or tokens[-1] == mc.eos_token_id


def test_a_tokenizer_whose_merges_cross_the_split_is_refused():
    """A byte-level BPE without a pre-tokenizer learns merges across ": " and " \\n": its prompts
    could not be the template's tokens, so the engine refuses it where it is built (Intake)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from oxygen_ros.engine.model.tokenizer import SPECIALS, HFTokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [f"Task: pick up the cup, State: {i} {i + 1};\nAction: \nwhat happened?"
              for i in range(200)]
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=600, special_tokens=list(SPECIALS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    mc = PRESETS["xr0-tiny"]
    with pytest.raises(ValueError, match="merges cross the split between the frame's prompt"):
        Intake(mc, HFTokenizer(tok, None, 1, 0), num_blocks=1 << 20, reserved_blocks=0,
               device=torch.device("cpu"))
