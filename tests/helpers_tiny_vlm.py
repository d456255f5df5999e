"""Tiny, randomly initialised vision-language models saved to a folder, for offline engine tests.

Real transformers classes, real processors and chat templates, a tokenizer trained here on a few
lines of zh/en/JSON text — only the sizes are tiny, so `hf:<folder>` runs end to end on a CPU in
seconds. Outputs are random text, which is the point: the harness must survive garbage answers.

Two families:
- `llava`: CLIP vision tower + Qwen2 text model (LlavaProcessor). Loads with torch + transformers
  alone, so it is the one the CPU tests run.
- `qwen2_vl`: Qwen2-VL (patch 14, 2x2 merge, M-RoPE) with the real Qwen2-VL image processor and a
  small pixel budget. Its processor needs torchvision (transformers builds its video half too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# The special tokens of the Qwen chat format, so prompts look like the real models' prompts.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

# Qwen-style chat format. Each image part becomes <|vision_start|><|image_pad|><|vision_end|>; the
# processor then repeats <|image_pad|> once per visual token of that image.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TRAINING_TEXT = [
    "请仔细观察图片，从选项中选出这道菜的名称。只回答一个大写字母。",
    "答案：C 宫保鸡丁 鱼香肉丝 麻婆豆腐 红烧肉 西红柿炒鸡蛋 米饭 面条 牛肉 鸡肉 猪肉",
    "估算每份的热量、蛋白质、碳水化合物和脂肪，以 JSON 输出。",
    '{"calories": 450, "protein": 12.5, "carbohydrates": 60.0, "fat": 18.2}',
    "Look at the photos and answer with a single uppercase letter: A B C D E F G H.",
    "Estimate calories (kcal), protein, carbohydrates and fat (g) per serving as JSON.",
    "Is this dish suitable for a low-fat diet? Yes, because it is steamed. No. 0123456789",
]


def train_tokenizer() -> object:
    """A byte-level BPE tokenizer (any text encodes) with the Qwen special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(TRAINING_TEXT * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE)


def _text_config(tokenizer: object) -> dict:
    vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
    return dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768,
                bos_token_id=vocab["<|endoftext|>"], eos_token_id=vocab["<|im_end|>"],
                pad_token_id=vocab["<|endoftext|>"])


def _finish(model: object, tokenizer: object, folder: Path) -> None:
    vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
    model.generation_config.eos_token_id = vocab["<|im_end|>"]  # type: ignore[attr-defined]
    model.generation_config.pad_token_id = vocab["<|endoftext|>"]  # type: ignore[attr-defined]
    # Sampling defaults as real instruct checkpoints ship them (Qwen3-VL-Instruct's values).
    for name, value in (("do_sample", True), ("temperature", 0.7), ("top_p", 0.8), ("top_k", 20)):
        setattr(model.generation_config, name, value)  # type: ignore[attr-defined]
    model.save_pretrained(folder)  # type: ignore[attr-defined]


def build_tiny_llava(folder: Path) -> Path:
    """CLIP (28 px images, 14 px patches → 4 visual tokens each) + a 1-layer Qwen2 text model."""
    import torch
    from transformers import CLIPImageProcessorPil, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = train_tokenizer()
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=14,
                               image_token="<|image_pad|>", num_additional_image_tokens=1,
                               vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE)
    config = LlavaConfig(
        text_config={"model_type": "qwen2", **_text_config(tokenizer)},
        vision_config=dict(model_type="clip_vision_model", hidden_size=16, intermediate_size=32,
                           num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14,
                           projection_dim=16),
        image_token_index=tokenizer.get_vocab()["<|image_pad|>"], image_seq_length=4,
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    _finish(LlavaForConditionalGeneration(config), tokenizer, folder)
    processor.save_pretrained(folder)
    return folder


def build_tiny_qwen2_vl(folder: Path) -> Path:
    """Qwen2-VL with a 1-layer vision tower and text model; images capped at 56x56 px (4 tokens)."""
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessorPil

    tokenizer = train_tokenizer()
    vocab = tokenizer.get_vocab()
    text = _text_config(tokenizer)
    # head_dim 16 → M-RoPE splits its 8 rotary frequencies over (time, height, width).
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"],
    )
    torch.manual_seed(0)
    _finish(Qwen2VLForConditionalGeneration(config), tokenizer, folder)
    # Saved piece by piece: building a Qwen2VLProcessor object itself needs torchvision.
    tokenizer.save_pretrained(folder)  # type: ignore[attr-defined]
    Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=56 * 56).save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen2VLProcessor"}))
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    return folder


BUILDERS = {"llava": build_tiny_llava, "qwen2_vl": build_tiny_qwen2_vl}


def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory, family: str = "llava") -> Path:
    """The folder of a tiny model of `family`, built once per test session (a few seconds)."""
    folder = tmp_path_factory.getbasetemp() / f"tiny-vlm-{family}"
    done = folder / ".complete"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        BUILDERS[family](folder)
        done.write_text("ok")
    return folder
