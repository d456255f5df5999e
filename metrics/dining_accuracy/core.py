"""DiningBench fine-grained classification accuracy: parse a model's option letter, score it.

The one parser for the classification task (`parse_choice`); the harness imports it from here.
"""

from __future__ import annotations

import itertools
import re
import string
import unicodedata
from collections.abc import Sequence
from typing import Any

# Markers of a concluding answer. Why a separate "final" tier: chain-of-thought text mentions many
# letters while weighing options; only a concluding marker says which one the model settled on.
_FINAL_MARKERS = (
    r"final\s+answer", r"final\s+choice", r"final\s+option", r"final\s+verdict",
    r"最终答案", r"最终选择", r"最终选项", r"最终结论", r"最终的?答案", r"综上所述", r"综上",
    r"therefore,?\s+the\s+answer\s+is", r"so\s+the\s+answer\s+is", r"thus,?\s+the\s+answer\s+is",
)
# Math-tuned models box their final answer ("$\boxed{C}$", "\boxed{C. 2.618}"); a box is final like the
# markers above. Why the whole box must be the letter: a box also holds the value worked out ("\boxed{I^2/r_0}",
# "\boxed{p + q - r}"), whose first letter is no option. A box of several letters ("\boxed{A, C}") is a
# multi-select: no single answer. One level of inner braces is allowed ("\boxed{\frac{21}{32}}").
_BOXED_RE = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_BOXED_LETTER_RE = re.compile(r"\s*(?:\(([A-Z])\)(?:\s.*)?|([A-Z])(?:\s*[.:：)]\s*.*)?)\s*", re.DOTALL)
_BOXED_SEVERAL_RE = re.compile(r"\s*\(?[A-Z]\)?(?:\s*(?:[,，、/&]|and)?\s*\(?[A-Z]\)?)+\s*")
# "正确的是 D" / "不属于…的选项是 D": Chinese prose names the chosen option after 的是 / 选项是; the
# look-behind keeps "不正确的是 D" (the option the model rejects) from reading as its answer.
_ANSWER_MARKERS = (
    r"correct\s+(?:answer|option|choice)(?:\s+letter)?", r"best\s+(?:answer|option|choice)",
    r"the\s+answer\s+is", r"my\s+answer", r"answer", r"i\s+(?:would\s+)?(?:choose|pick|select|go\s+with)",
    r"i(?:'d|\s+would)\s+say",
    r"正确答案", r"正确选项", r"答案", r"答(?=\s*:)", r"解答(?=\s*:)", r"应选择?", r"故选", r"我选择?", r"选择",
    r"选项为", r"选项是", r"(?<!不)正确的[\u4e00-\u9fff]{0,4}?(?=\s*(?:是|为))", r"选",
)
# "错误的叙述是 C", "不正确的是 B", "the incorrect statement is D": the answer when the question asks which
# statement is wrong. Why a weaker tier: the question is not at hand, and after a question asking for the
# right one, "不正确的是 D" names an option the model rejects; so these count only when nothing else in
# the output is marked as the answer.
_NEGATED_MARKERS = (
    r"(?:错误|不正确|不对|不恰当|不合理|不符合题意|有误)的[\u4e00-\u9fff]{0,4}?(?=\s*(?:是|为))",
    r"(?:incorrect|false|wrong|untrue)\s+(?:statement|option|one)\s+is",
)
# After a marker: closing brackets ("[正确答案]C", "【答案】C"), bold ("**Answer:** C"), verbs and
# punctuation, then the letter, bracketed, bold or in TeX dollars ("Answer: $C$").
# TeX's inline-math opener counts as a bracket when a capital letter follows ("the answer is \\( H. 55.92 \\)").
_GLUE_HEAD = r"[\]】」）)]?(?:\s*(?:is|would\s+be|should\s+be|为|是|应为|应该是|:|=|-|—|\*+)\s*)*\s*"
_GLUE = (_GLUE_HEAD + r"(?:option\s*|选项\s*)?(?:[\(\[\*【「$]|\\[(\[](?=\s*(?-i:[A-Z])(?![A-Za-z])))*\s*")
# A letter is a capital not glued to other Latin letters; "I" followed by a lowercase word or an
# apostrophe is the English pronoun ("Answer: I think ...", "I'm sorry"), not option I; a letter
# followed by ", B", "、C", "和 C", "and C" or "or C" starts a list of several options (a multi-select or a
# hedge), which is no single answer. The joined letter is matched case-sensitively ("C and a side dish").
_LETTER = (r"(?!I\s+[a-z])(?!I['’])([A-Z])(?![A-Za-z])"
           r"(?!\s*(?:[,，、/和或与及&+]|\band\b|\bor\b)\s*(?-i:(?!I\s+[a-z])[A-Z])(?![A-Za-z'’]))")
_FINAL_RE = re.compile(r"(?:" + "|".join(_FINAL_MARKERS) + r")" + _GLUE + _LETTER, re.IGNORECASE)
_ANSWER_RE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(_ANSWER_MARKERS) + r")" + _GLUE + _LETTER, re.IGNORECASE)
# A letter followed by ":" or "." and text is an option label: "下列说法错误的是A:…;B:…" is the question echoed.
# An answer marker followed by several letters, glued or joined ("【答案】 CD", "故选BC", "答案：B, C", "正确的答案是C和D";
# not "B E", which is maths): the model gave several answers (a multi-select habit), so the output has none
# single, whatever else it says.
# Every option letter in order ("从A,B,C,D中选择") lists the options, not answers: it is left to other rules.
_SEVERAL_RE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(_ANSWER_MARKERS) + r")" + _GLUE
                         + r"(?-i:([A-Z](?:(?:\s*(?:[,，、/和或与及&+]|\band\b|\bor\b)\s*)?(?!I\s+[a-z])(?!I['’])[A-Z]){1,7}))(?![A-Za-z])",
                         re.IGNORECASE)


# After a marked answer, another option joined to it on the same line: "答案是 (B) 香蕉 和 (C) 橘子",
# "Answer: B. pho and D. ramen" (each letter with its text between): several answers, none single.
_JOINED_RE = re.compile(r"(?:[,，、&]|\b(?:and|as\s+well\s+as)\b|和|与|及|以及)\s*(?:option\s*|选项\s*)?"
                        r"(?:[\(（【\[]\s*([A-Z])\s*[\)）】\]]|(?<![A-Za-z])([A-Z])\s*[.．:：])", re.IGNORECASE)


def _gives_several(text: str, letters: str) -> bool:
    for match in _SEVERAL_RE.finditer(text):
        given = re.sub(r"[^A-Z]", "", match.group(1))
        if len(set(given)) > 1 and given != letters:
            return True
    for match in _ANSWER_RE.finditer(text):
        rest = text[match.end():].split("\n", 1)[0]
        joined = {a or b for a, b in (m.groups() for m in _JOINED_RE.finditer(rest[:200]))}
        if joined - {match.group(1)} and not re.search(r"\b(?:not|rather\s+than|instead\s+of)\b|不是|而非|而不是", rest[:200], re.I):
            return True
    return False


_NEGATED_RE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(_NEGATED_MARKERS) + r")" + _GLUE + _LETTER
                         + r"(?!\s*(?:[:：]|[.．、]\s*\S))", re.IGNORECASE)
_FINAL_TEXT_RE = re.compile(r"(?:" + "|".join(_FINAL_MARKERS + _ANSWER_MARKERS) + r")" + _GLUE_HEAD
                            + r"(?:option\s*|选项\s*)?(.+)$", re.IGNORECASE)
# Chinese prose that names one option as right: "选项A正确", "D选项是正确的", "故C项正确", "只有D行为".
# Why: answers to Chinese exams often conclude this way instead of with a marker.
_ZH_VERDICT_RE = re.compile(r"(?:选项|只有)\s*([A-Z])(?![A-Za-z])\s*(?:选?项)?\s*(?:是|为)?\s*(?:正确|对的|符合题意)"
                            r"|(?<![A-Za-z])([A-Z])\s*(?:选?项)\s*(?:是|为)?\s*(?:正确|符合题意)"
                            r"|只有\s*(?:选项\s*)?([A-Z])(?![A-Za-z])")
# Shapes that are an answer only when they stand alone on a line: "(C)", "**C**", "C.", "C. name".
_BRACKETED_RE = re.compile(r"(?<![A-Za-z])[\(\[（【]\s*([A-Z])\s*[\)\]）】]")
_BOLD_RE = re.compile(r"\*\*\s*([A-Z])\s*[.)]?\s*\*\*")
_OPTION_ENTRY_RE = re.compile(r"^[\s>*#\-•]*[\(\[（【]?\s*[A-Z]\s*[\)\]）】.:：]\s*\S")
_LINE_START_RE = re.compile(r"^[\s>*#\-•]*([A-Z])\s*\**\s*(?:[.．、):：]|$)")
_LONE_RE = re.compile(r"^[\s*_`'\"(\[（【]*(?:(?:option|选项)\s*[\s*_`'\"(\[（【]*)?([A-Za-z])[\s*_`'\")\]）】.。!！]*$",
                      re.IGNORECASE)
# End-of-sequence tokens a model printed as text ("C<eoa>", "C</s>", "C<|im_end|>"). Why: base and chat
# models run on past them, inventing new questions with their own "答案：D"; what precedes the
# first one is the answer the model gave.
_END_TOKEN_RE = re.compile(r"<\|?(?:eoa|eos|eot_id|im_end|endoftext)\|?>|</s>|</eoa>|\[/?eoa\]|<eoh>", re.IGNORECASE)
# A new question opening a line ("Question:", "问题：", "题目：") after an answer: the model ran on into a
# question of its own making. Why it closes the answer like an end token: what follows answers that new
# question, not ours (its "答案：D" is not a change of mind).
_QUESTION_HEADER = r"^[ \t>*#]*(?:question|problem|问题|题目|下一题)\s*\d{0,3}\s*[:：]"
_CLOSER_RE = re.compile(_END_TOKEN_RE.pattern + "|" + _QUESTION_HEADER, re.IGNORECASE | re.MULTILINE)
# A line that answers a numbered sub-question ("1. 答案：A", "(2) Answer: C", "第二题：B", "Q3: the answer is D").
# Why: an output answering several sub-questions has no single answer, even when its last line has one.
_SUB_QUESTION_RE = re.compile(r"^[\s>*#\-•]*(?:\(?\d{1,2}\s*[).、．:：]|\(?[一二三四五六七八九十]{1,3}\s*[)、．]|[①-⑳]|第\s*[一二三四五六七八九十\d]{1,3}\s*(?:小题|题|问|空|部分)"
                              r"|(?:q|question|问题|小题)\s*\d{1,2}(?!\d))", re.IGNORECASE)
# An echoed instruction's example ("例如[正确答案]A<eoa>", "e.g. Answer: A") is not the model's answer.
# An echoed one-shot prompt's worked example ("下面是一个例子:\\n<question>\\n[正确答案]B<eoa>"), up to its end token.
_WORKED_EXAMPLE_RE = re.compile(r"(?:下面是一个例子|以下是一个例子|here\s+is\s+an\s+example)\s*[:：][^<]{0,1500}?"
                                "(?:" + _END_TOKEN_RE.pattern + ")", re.IGNORECASE)
_EXAMPLE_RE = re.compile(r"(?:例如|比如|e\.g\.|for\s+example)[,，:：]?\s*[\[【(]?\s*(?:正确答案|答案|answer)[\]】)]?\s*[:：]?\s*"
                         r"[A-Z](?![A-Za-z])", re.IGNORECASE)
# TeX around a letter: "\text{B}", "$C$", "\( B \)". Why: math-tuned models box the letter.
_TEX_LETTER_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{\s*\(?([A-Z])\)?\s*\}")
_TEX_MATH_RE = re.compile(r"\$\s*([A-Z])\s*\$|\\\(\s*([A-Z])\s*\\\)")
# An answer tag ("<answer>B</answer>"), the reply format that reasoning-model prompts ask for. Why: the
# prose around the tag is working that walks through the other options ("A is false, B is true …"), and
# the tag is the model's own statement of its answer. A tag holding several letters ("<answer>BC</answer>",
# a multi-select), or tags that disagree, is no single answer; empty tags (an echoed instruction) are ignored.
_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
# A line that concludes ("因此…", "Therefore…"): after an answer and an end token, a conclusion that
# names another letter means the model changed its mind, and the answer is ambiguous.
_CONCLUSION_RE = re.compile(r"^\s*(?:因此|所以|故|综上|therefore|thus|so\b)", re.IGNORECASE)


def _strip_reasoning(text: str) -> str:
    """Drop <think>...</think> blocks: the answer is what follows them, not the scratchpad."""
    if "</think>" in text.lower():
        text = re.split(r"</think>", text, flags=re.IGNORECASE)[-1]
    # An unclosed <think> means the output was cut off while still thinking: no answer was given.
    return re.split(r"<think>", text, flags=re.IGNORECASE)[0]


# A letter repeated as a prompt asks ("duplicate that letter five times: FFFFF", LiveBench's and
# MMLU-Pro's instruction): the model's stated answer, read as a final answer. Four to ten times anywhere it
# stands alone, three times alone on its line (a word like "AAA" or "III" is left).
_REPEATED_RE = re.compile(r"(?<![A-Za-z])([A-Z])\1{3,9}(?![A-Za-z])|^([A-Z])\2{2}$", re.MULTILINE)
# The same run as the output's last line, in code ticks, bold or quotes ("```DDDDD```", "**JJJJJ.**"): the
# requested final format, as decisive as an answer tag.
_REPEATED_LAST_RE = re.compile(r"[\s*_`'\"(\[]*([A-Z])\1{2,9}[\s*_`'\".)\]]*")


def _normalize(text: str) -> str:
    """NFKC folds full-width letters and punctuation (Ｃ, ：, （）) that Chinese answers use; a letter
    repeated as asked ("DDDDD") is one letter; TeX wrappers around a lone letter are unwrapped; an
    echoed instruction's example answer is dropped."""
    text = unicodedata.normalize("NFKC", text)
    text = _REPEATED_RE.sub(lambda m: f" Final answer: {m.group(1) or m.group(2)} ", text)
    text = _TEX_LETTER_RE.sub(r"\1", text)
    text = _TEX_MATH_RE.sub(lambda m: m.group(1) or m.group(2), text)
    return _EXAMPLE_RE.sub(" ", _WORKED_EXAMPLE_RE.sub(" ", text))


def _letters(n_options: int) -> str:
    if not isinstance(n_options, int) or isinstance(n_options, bool) or not 1 <= n_options <= 26:
        raise ValueError(f"n_options must be an integer from 1 to 26, got {n_options!r}")
    return string.ascii_uppercase[:n_options]


def _option_key(s: str) -> str:
    return re.sub(r"[\s\"'“”‘’「」《》*`.。!！,，;；:：()（）]+", "", _normalize(s)).casefold()


def _match_option_text(answer: str, options: Sequence[str] | None) -> str | None:
    """The letter of the one option whose name equals `answer` (case, spaces and quotes ignored)."""
    if not options:
        return None
    wanted = _option_key(answer)
    if not wanted:
        return None
    hits = [i for i, option in enumerate(options) if _option_key(str(option)) == wanted]
    return string.ascii_uppercase[hits[0]] if len(hits) == 1 else None


def _named_in(sentence: str, options: Sequence[str] | None) -> str | None:
    """The letter of the one option whose Latin-script name the sentence contains ("... by Georges Seurat.").
    Only whole words count, so only names in Latin script: Chinese has no spaces, and "麻婆豆腐" inside a
    sentence may be part of another dish's name. A sentence with a negation ("not Seurat") names what the
    model rejects, and a name inside a longer named option yields to the longer one."""
    if not options or re.search(r"\b(?:not|no|never|none)\b|n't", sentence, re.IGNORECASE):
        return None
    said = " " + " ".join(re.findall(r"[\w$%.'/-]+", sentence.casefold())) + " "
    names = [" ".join(re.findall(r"[\w$%.'/-]+", str(option).casefold())) for option in options]
    hits = [i for i, name in enumerate(names) if len(name) >= 3 and re.search(r"[a-z]", name)
            and re.search(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])", said.replace(". ", " ").rstrip(". "))]
    hits = [i for i in hits if not any(j != i and names[i] in names[j] for j in hits)]
    return string.ascii_uppercase[hits[0]] if len(hits) == 1 else None


def _marked(text: str) -> list[str]:
    """Letters that a marker ("Answer: C", "答案：C") or Chinese prose ("选项A正确") gives as the answer."""
    found = [m.group(1) for m in _ANSWER_RE.finditer(text)]
    found += [next(g for g in m.groups() if g) for m in _ZH_VERDICT_RE.finditer(text)]
    return found


# Option labels inside one line: "A：苹果 B：香蕉 C：橘子", "(A) 10 (B) 20 (C) 30".
_INLINE_OPTION_RE = re.compile(r"(?:^|(?<=\s))[\(\[（【]?([A-Z])[\)\]）】]?\s*[:：.．、)]\s*\S|[\(（【]([A-Z])[\)）】]\s*\S")


def _echoes_options(line: str) -> bool:
    """Whether a line lists three or more options in order, label and text ("A：苹果 B：香蕉 C：橘子"):
    the question echoed, not an answer; its first or last label is no choice."""
    labels = [a or b for a, b in (m.groups() for m in _INLINE_OPTION_RE.finditer(line))]
    run = 1
    for previous, current in zip(labels, labels[1:], strict=False):
        run = run + 1 if ord(current) == ord(previous) + 1 else 1
        if run >= 3:
            return True
    return False


def _mentions(line: str, *, line_start: bool = True) -> list[str]:
    """Letters that a line presents as an answer (markers, brackets, bold, "C. name" at line start);
    none from a line that echoes the options."""
    if _echoes_options(line) and not _marked(line):
        return []
    found = _marked(line)
    found += [m.group(1) for m in _BRACKETED_RE.finditer(line)]
    found += [m.group(1) for m in _BOLD_RE.finditer(line)]
    start = _LINE_START_RE.match(line) if line_start else None
    if start:
        found.append(start.group(1))
    return found


def _in_range(letter: str | None, letters: str) -> str | None:
    # A letter beyond the option count is not a valid answer, even if clearly stated.
    return letter if letter is not None and letter in letters else None


# The model's last word is that no option fits ("None of the above", "以上都不是", "都不对"): whatever it
# called closest before is not its answer.
_NONE_OF_THEM_RE = re.compile(r"(?:none\s+of\s+(?:the\s+(?:above|options|choices|answers)|these|them)|no\s+(?:correct\s+)?"
                              r"(?:option|choice|answer)\s+(?:is\s+)?(?:correct|fits|matches|applies)|以上(?:选项)?都不(?:是|对|正确)|"
                              r"(?:选项)?都不(?:对|正确|符合)|没有正确(?:的)?(?:选项|答案)|无正确(?:选项|答案))", re.IGNORECASE)


def _ends_with_none_of_them(text: str, options: Sequence[str] | None) -> bool:
    """The last line ends by saying no option fits, with no letter after it ("… but C is closest" keeps C)
    and not as the text of the letter just before it ("Answer: D (None of the above)"), unless an option
    is itself "None of the above"."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = list(_NONE_OF_THEM_RE.finditer(lines[-1])) if lines else []
    if not found:
        return False
    before, after = lines[-1][:found[-1].start()], lines[-1][found[-1].end():]
    if re.search(r"(?<![A-Za-z])(?!I\s+[a-z])(?!I['’])[A-Z](?![A-Za-z])", after):
        return False
    if re.search(r"(?<![A-Za-z])[A-Z]\s*[\(（:：.\-—–]*\s*$", before):
        return False
    return not (options and any(_NONE_OF_THEM_RE.search(str(o)) for o in options))


def _read(text: str, letters: str, options: Sequence[str] | None) -> str | None:
    """The rules of `parse_choice` on text that is already normalized and has no end tokens."""
    lone = _LONE_RE.match(text)
    if lone:
        return _in_range(lone.group(1).upper(), letters)
    if _ends_with_none_of_them(text, options):
        return None

    # A concluding marker ("Final answer: C", "最终答案：C", "\boxed{C}") overrides everything said before it.
    finals = _finals(text)
    if finals:
        return _in_range(finals[-1][1], letters)
    # A box holding one option's value ("The answer is \( \boxed{50} \)" when option B is "50") answers with
    # that option when the output names no letter. Why a letter outranks it: the letter is the requested
    # answer, while a boxed value is worked-out maths that can equal an option by chance ("\boxed{2 - \sqrt{2}}"
    # and then "Answer: $C$").
    marked = _read_marked(text, letters, options)
    return marked if marked is not None else _in_range(_boxed_option(text, options), letters)


def _finals(text: str) -> list[tuple[int, str | None]]:
    """Concluding answers in order of position: (offset, letter), the letter None for a box of several letters."""
    found = [(m.start(), m.group(1)) for m in _FINAL_RE.finditer(text)]
    for m in _BOXED_RE.finditer(text):
        one = _BOXED_LETTER_RE.fullmatch(m.group(1))
        if one:
            found.append((m.start(), one.group(1) or one.group(2)))
        elif _BOXED_SEVERAL_RE.fullmatch(m.group(1)):
            found.append((m.start(), None))
    return sorted(found, key=lambda hit: hit[0])


def _tex_plain(s: str) -> str:
    """TeX markup dropped from a value, so a boxed "\\frac{21}{32}" equals an option "$\\frac{21}{32}$"."""
    s = re.sub(r"\\(?:text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}", r"\1", s)
    return re.sub(r"\$|\\[(),;!]|\\left|\\right", "", s)


def _boxed_option(text: str, options: Sequence[str] | None) -> str | None:
    """The letter of the one option whose value the last box holds, when it holds no letter."""
    boxes = _BOXED_RE.findall(text)
    if not options or not boxes:
        return None
    return _match_option_text(_tex_plain(boxes[-1]), [_tex_plain(str(option)) for option in options])


def _read_marked(text: str, letters: str, options: Sequence[str] | None) -> str | None:
    """The rules of `_read` after the concluding markers: marked answers, then letters shown alone."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1]
    if _answers_sub_questions(lines) or _gives_several(text, letters):
        return None
    marked = _marked(text)
    # Answer first, then an explanation that walks through the other options ("**C**\n* **B. …**"):
    # a lone letter on the first line is the answer unless a marked answer says otherwise.
    first_lone = _LONE_RE.match(lines[0])
    if first_lone and first_lone.group(1).isupper() and len(lines) > 1:
        return _in_range(first_lone.group(1), letters) if set(marked) <= {first_lone.group(1)} else None
    # An explicit "Answer: C" / "答案：C" outranks letters merely shown in brackets or bold
    # ("Answer: C. Unlike (B), ..."): if every marked answer agrees, that is the answer.
    if marked:
        if len(set(marked)) == 1:
            return _in_range(marked[0], letters)
        on_last = set(_marked(last))
        return _in_range(on_last.pop(), letters) if len(on_last) == 1 else None
    negated = {m.group(1) for m in _NEGATED_RE.finditer(text)}
    if len(negated) == 1:  # "错误的叙述是 C" and no other marked answer
        return _in_range(negated.pop(), letters)

    mentioned = [letter for line in lines for letter in _mentions(line)]
    if len(set(mentioned)) == 1:
        return _in_range(mentioned[0], letters)

    # Several letters were discussed: the answer must stand on the last line, and alone there.
    # An echoed option list ("(A) 2/38 … (J) 7/38") ends with a letter and its text: no answer.
    listed = [line for line in lines if _OPTION_ENTRY_RE.match(line)]
    if len(listed) >= 3 and _OPTION_ENTRY_RE.match(last):
        return None
    last_lone = _LONE_RE.match(last)
    if last_lone and last_lone.group(1).isupper():
        return _in_range(last_lone.group(1), letters)
    # "B. name" as the last line after several letters is more likely the end of an echoed
    # option list than an answer, so only explicit shapes count here.
    on_last = set(_mentions(last, line_start=False))
    if mentioned and len(on_last) == 1:
        return _in_range(on_last.pop(), letters)

    # No letter at all: the model may have answered with an option's name, alone, after a
    # marker ("正确答案: 古董由甲子女继承") or within its last sentence.
    if not mentioned and options:
        named = _match_option_text(text, options)
        marked_text = _FINAL_TEXT_RE.search(last)
        if named is None and marked_text:
            named = _match_option_text(marked_text.group(1), options) or _named_in(marked_text.group(1), options)
        if named is None and not any(_mentions_letter(line) for line in lines):
            named = _named_in(last, options)
        return _in_range(named, letters)
    return None


def _answers_sub_questions(lines: Sequence[str]) -> bool:
    """Whether two or more numbered parts each give an answer ("67. 【答案】 A", "(2)【解析】…<eoe>\\n【答案】 B"):
    an output answering several sub-questions has no single answer. A part runs from a numbered line to the
    next one; numbered reasoning steps followed by one answer make one part with an answer, not two."""
    parts, answered = 0, 0
    current = False
    for line in lines:
        if _SUB_QUESTION_RE.match(line):
            answered += current
            parts, current = parts + 1, False
        if parts and not current and _marked(line):
            current = True
    return answered + current >= 2


def _mentions_letter(line: str) -> bool:
    """Whether a line names an option by letter in any shape ("A:", "(B)", "option C")."""
    return bool(re.search(r"(?:^|[\s(\[（【])[A-Z](?:[:：.)\]）】]|\s*$)|option\s+[A-Z](?![A-Za-z])", line))


def parse_choice(text: str | None, n_options: int = 8, options: Sequence[str] | None = None) -> str | None:
    """Read the option letter a model chose, or None when there is no single clear answer. Strict first (the
    whole answer is one letter), then lenient shapes; with chain of thought the final answer wins; several
    different letters and no concluding marker is ambiguous (None). When `options` (the option names) is
    given, its length sets the letters and an answer that is exactly one option's name, or a last sentence
    naming exactly one option, counts. A model that runs on past an end token ("C<eoa>", "C</s>") answered
    with what came before it.

    >>> parse_choice("C")
    'C'
    >>> parse_choice("答案：C")
    'C'
    >>> parse_choice("选C。")
    'C'
    >>> parse_choice("(B) 宫保鸡丁")
    'B'
    >>> parse_choice("**D**")
    'D'
    >>> parse_choice("A has peanuts, B has none, so B or C.\\nFinal answer: C")
    'C'
    >>> parse_choice("It could be A or D.") is None
    True
    >>> parse_choice("J") is None  # only A-H exist for 8 options
    True
    >>> parse_choice("鱼香肉丝", options=["宫保鸡丁", "鱼香肉丝", "回锅肉", "麻婆豆腐"])
    'B'
    >>> parse_choice("<think>A? no, maybe B.</think>\\nB")
    'B'
    >>> parse_choice("【答案】A") , parse_choice("[正确答案]C<eoa>"), parse_choice("正确答案]B")
    ('A', 'C', 'B')
    >>> parse_choice("so the result is \\\\boxed{C}."), parse_choice("Answer: $C$"), parse_choice("Answer: \\\\( \\\\text{B} \\\\)")
    ('C', 'C', 'B')
    >>> parse_choice("**Answer:** **A. Mapo tofu**"), parse_choice("- **Answer**: B (4.98 g)")
    ('A', 'B')
    >>> parse_choice("[正确答案]A<eoa>\\n以下哪项是合法的：A:…;D:…\\n[正确答案]D<eoa>")  # runs on past <eoa>
    'A'
    >>> parse_choice("**C**\\n\\n* **B. Kung pao** has peanuts.\\n* **D. Mapo tofu** is spicy.")
    'C'
    >>> parse_choice("因此选项A正确，选项B、C、D均不正确。"), parse_choice("只有D行为构成盗窃罪。")
    ('A', 'D')
    >>> parse_choice("The painting was created by Georges Seurat.", options=["Monet", "Georges Seurat", "Degas"])
    'B'
    >>> parse_choice("答案：A,B,C,D") is None  # several options is no single answer
    True
    >>> parse_choice("I'm sorry, I can't tell from this photo.", n_options=10) is None  # not option I
    True
    >>> [parse_choice(t) for t in ("故选BC。", "答案：B和C", "Answer: B and C", "1. 答案：A\\n2. 答案：C")]  # several answers
    [None, None, None, None]
    >>> parse_choice("Answer: None of the above") is None  # "None" is not option N
    True
    >>> parse_choice("答案：A\\n问题：下列哪项正确？A. x B. y\\n答案：D")  # closed by a new question: A is final
    'A'
    >>> parse_choice("答案：A\\n答案：D")  # not closed: the later answer, on the last line, is the model's last word
    'D'
    >>> parse_choice("错误的叙述是C。"), parse_choice("选项中正确的等式是D"), parse_choice("the correct option letter is C")
    ('C', 'D', 'C')
    >>> parse_choice("正确的是A，不正确的是B。")  # a rejected option yields to the answer
    'A'
    >>> parse_choice("<think>A is wrong, so B? Or C.</think>\\nA is false; C is true.\\n\\n<answer>C</answer>")
    'C'
    >>> [parse_choice(t) for t in ("<answer>BC</answer>", "<answer>A, C, D</answer>", "<answer>A</answer> <answer>D</answer>")]
    [None, None, None]
    >>> parse_choice("The answer is \\\\( \\\\boxed{50} \\\\).", options=["25", "50"]), parse_choice("\\\\boxed{A, C}") is None
    ('B', True)
    """
    letters = _letters(len(options) if options is not None else n_options)
    if not isinstance(text, str):
        return None
    original = text
    text = _normalize(_strip_reasoning(text)).strip()
    if not text:
        return None
    # Run-on generations: the first answer is final only when it is clearly closed, by an end token the
    # model printed ("C<eoa>", "C</s>") or a new question opening a line; what follows the close is ignored
    # unless a concluding line there names another letter (then the model changed its mind: None). An
    # answer that is not closed competes with every later one (see `_read`). Only the first few closes
    # are tried, so degenerate output ("<eoa>" * 10**4) stays linear.
    last_line = next((line for line in reversed(unicodedata.normalize("NFKC", _strip_reasoning(original)).splitlines())
                      if line.strip()), "")
    repeated = _REPEATED_LAST_RE.fullmatch(last_line)
    if repeated:  # "Hence my answer is:\nFFFFF": the prompt's own answer format, the model's last word
        return _in_range(repeated.group(1), letters)
    if _answers_sub_questions(text.splitlines()):  # before the closes: each sub-answer may end with "<eoa>"
        return None
    tagged = [tag.strip() for tag in _ANSWER_TAG_RE.findall(text) if tag.strip()]
    if tagged:
        read = {_read(tag, letters, options) for tag in tagged}
        return read.pop() if len(read) == 1 else None
    for close in itertools.islice(_CLOSER_RE.finditer(text), 4):
        head = _END_TOKEN_RE.sub("\n", text[: close.start()]).strip()
        first = _read(head, letters, options) if head else None
        if first is not None:
            tail = _END_TOKEN_RE.sub("\n", text[close.end():])
            changed = {x for line in tail.splitlines() if _CONCLUSION_RE.match(line) for x in _marked(line)}
            return first if changed <= {first} else None
    text = _END_TOKEN_RE.sub("\n", text).strip()
    if not text:
        return None
    return _read(text, letters, options)


def score_choices(
    predictions: Sequence[str | None],
    references: Sequence[str],
    n_options: int = 8,
    options: Sequence[Sequence[str] | None] | None = None,
) -> dict[str, Any]:
    """Accuracy over raw predictions; unparsed answers count as wrong and are reported. `options`, when given,
    holds each item's option names (one list per item).

    >>> r = score_choices(["C", "Answer: B", "A or D?"], ["C", "A", "D"])
    >>> (r["accuracy"], r["n"], r["parse_failures"], r["parsed"])
    (0.3333333333333333, 3, 1, ['C', 'B', None])
    """
    golds = _golds(predictions, references, n_options, options)
    parsed = [parse_choice(prediction, n_options=n_options, options=options[i] if options is not None else None)
              for i, prediction in enumerate(predictions)]
    return _accuracy(parsed, golds)


def score_parsed_choices(parsed: Sequence[str | None], references: Sequence[str], n_options: int = 8,
                         options: Sequence[Sequence[str] | None] | None = None) -> dict[str, Any]:
    """`score_choices` for answers already read by `parse_choice` (a letter, or None when unparsed):
    each answer is parsed once, wherever it was parsed.

    >>> score_parsed_choices(["C", None], ["C", "A"])["correct"]
    [True, False]
    """
    return _accuracy(list(parsed), _golds(parsed, references, n_options, options))


def _golds(predictions: Sequence[Any], references: Sequence[str], n_options: int,
           options: Sequence[Sequence[str] | None] | None) -> list[str]:
    """Each reference letter, upper case; lengths that differ, or a letter beyond the item's
    options, are a ValueError."""
    if len(predictions) != len(references):
        raise ValueError(f"predictions ({len(predictions)}) and references ({len(references)}) differ in length")
    if options is not None and len(options) != len(references):
        raise ValueError(f"options ({len(options)}) must give one list of option names per reference ({len(references)})")
    if not references:
        raise ValueError("no predictions to score: predictions and references are empty")
    golds = []
    for i, reference in enumerate(references):
        item_options = options[i] if options is not None else None
        letters = _letters(len(item_options) if item_options is not None else n_options)
        gold = reference.strip().upper() if isinstance(reference, str) else None
        if gold is None or len(gold) != 1 or gold not in letters:
            raise ValueError(f"reference {i} is {reference!r}; expected one of the letters {letters}")
        golds.append(gold)
    return golds


def _accuracy(parsed: list[str | None], golds: list[str]) -> dict[str, Any]:
    correct = [choice == gold for choice, gold in zip(parsed, golds, strict=True)]
    n = len(golds)
    return {
        "accuracy": sum(correct) / n,
        "n": n,
        "parse_failures": sum(choice is None for choice in parsed),
        "correct": correct,
        "parsed": parsed,
    }
