"""Food terms in English and Chinese, one concept per row: the shared representation dedupe compares dishes
on (synonyms, spellings and another language map to one concept) and the bridge from a merchant's ingredient
names to USDA FoodData Central descriptions (construct/fdc.py)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

# A row: `concept | kind | English forms | Chinese forms | FDC description` (an SR Legacy food's own, for
# the nutrition cross-check). Kinds: `i` ingredient, `s` staple or seasoning (on most menus: almost no
# evidence that two dishes are one), `d` a dish word (soup, noodles), `c` a cooking method, `m` menu
# marketing and `x` a filler word (both dropped).
TERMS = """
rice | s | rice; steamed rice; white rice; cooked rice; plain rice | 米饭; 白饭; 白米饭; 米; 饭 | Rice, white, long-grain, regular, enriched, cooked
fried rice | d | fried rice | 炒饭 |
egg | s | egg; eggs; whole egg; soft egg; onsen egg; soft boiled egg; poached egg; fried egg | 鸡蛋; 蛋; 鸡子; 温泉蛋; 溏心蛋; 荷包蛋 | Egg, whole, raw, fresh
noodle | d | noodle; noodles; lo mein; mein | 面条; 面; 麵; 拉面; 挂面 | Noodles, egg, cooked, enriched, with added salt
rice noodle | i | rice noodle; rice noodles; rice vermicelli; ho fun; mixian | 米粉; 米线; 河粉; 粉 |
glass noodle | i | glass noodle; glass noodles; cellophane noodles; vermicelli | 粉丝; 粉条 |
pasta | i | pasta; spaghetti; penne; macaroni; fusilli; linguine | 意面; 意大利面; 通心粉 | Pasta, dry, enriched
udon | i | udon | 乌冬; 乌冬面 |
ramen | d | ramen | 日式拉面 |
dumpling | d | dumpling; dumplings; jiaozi; potsticker; potstickers; gyoza | 饺子; 水饺; 煎饺; 锅贴 |
wonton | d | wonton; wontons; won ton | 馄饨; 云吞; 抄手 |
bun | d | bun; buns; bao; baozi; steamed bun | 包子; 馒头; 包 |
pancake | d | pancake; pancakes; crepe | 饼; 煎饼; 烙饼 |
soup | d | soup; broth; bisque | 汤; 羹 |
stew | c | stew; stewed; casserole | 炖; 煲; 焖 |
salad | d | salad | 沙拉; 色拉; 凉拌 |
bowl | d | bowl; rice bowl; donburi; don | 盖饭; 盖浇饭; 饭碗; 丼; 碗 |
hot pot | d | hot pot; hotpot | 火锅 |
porridge | d | porridge; congee; jook | 粥; 稀饭 |
curry | d | curry | 咖喱 |
sandwich | d | sandwich; sandwiches; sub | 三明治 |
burger | d | burger; hamburger | 汉堡; 汉堡包 |
pizza | d | pizza | 披萨; 比萨 |
roll | d | roll; rolls; wrap | 卷 |
sushi | d | sushi | 寿司 |
chicken | i | chicken; chicken breast; chicken meat | 鸡肉; 鸡; 鸡胸肉; 鸡胸 | Chicken breast, skinless, boneless, meat only, raw
chicken thigh | i | chicken thigh; chicken thighs; chicken leg | 鸡腿; 鸡腿肉 | Chicken thigh, meat only, raw
chicken wing | i | chicken wing; chicken wings; wings | 鸡翅; 鸡翅膀 |
duck | i | duck; duck meat | 鸭; 鸭肉 |
beef | i | beef; steak; beef steak; flank steak; brisket; beef brisket | 牛肉; 牛; 牛腩; 肥牛; 牛排 | Beef, flank, steak, separable lean only, trimmed to 0" fat, choice, raw
ground beef | i | ground beef; minced beef; beef mince | 牛肉末; 牛肉馅 | Beef, ground, 85% lean meat / 15% fat, raw
pork | i | pork; pork loin; pork shoulder | 猪肉; 猪; 肉片; 肉丝; 里脊 |
pork belly | i | pork belly | 五花肉; 猪五花 |
ground pork | i | ground pork; minced pork; pork mince | 猪肉末; 肉末; 肉馅; 猪肉馅 |
pork rib | i | pork rib; pork ribs; spare ribs; ribs | 排骨; 猪排骨; 小排 |
lamb | i | lamb; mutton; lamb shoulder | 羊肉; 羊 |
bacon | i | bacon | 培根; 腊肉 |
ham | i | ham | 火腿 |
sausage | i | sausage; sausages | 香肠; 腊肠 |
shrimp | i | shrimp; shrimps; prawn; prawns; shelled shrimp | 虾仁; 虾; 大虾; 鲜虾 | Crustaceans, shrimp, raw
fish | i | fish; fish fillet; white fish; fillet | 鱼; 鱼片; 鱼肉 |
salmon | i | salmon | 三文鱼; 鲑鱼 | Fish, salmon, Atlantic, farmed, raw
tuna | i | tuna | 金枪鱼; 吞拿鱼 |
cod | i | cod | 鳕鱼 |
squid | i | squid; calamari | 鱿鱼 |
crab | i | crab; crab meat | 蟹; 螃蟹; 蟹肉 |
clam | i | clam; clams | 蛤蜊; 花甲 |
scallop | i | scallop; scallops | 扇贝; 带子 |
tofu | i | tofu; bean curd; beancurd | 豆腐; 嫩豆腐; 老豆腐 | Tofu, raw, firm, prepared with calcium sulfate
dried tofu | i | dried tofu; tofu skin; bean curd sheet | 豆干; 豆腐干; 腐竹; 豆皮 |
broccoli | i | broccoli | 西兰花; 西蓝花; 花椰菜 | Broccoli, raw
cauliflower | i | cauliflower | 花菜; 菜花 | Cauliflower, raw
carrot | i | carrot; carrots | 胡萝卜; 红萝卜 | Carrots, raw
pea | i | pea; peas; green peas | 豌豆; 青豆 | Peas, green, cooked, boiled, drained, without salt
scallion | s | scallion; scallions; green onion; green onions; spring onion; spring onions; chives; chive | 葱; 葱花; 小葱; 香葱; 大葱 | Onions, spring or scallions (includes tops and bulb), raw
onion | i | onion; onions; yellow onion; red onion | 洋葱 |
cabbage | i | cabbage; white cabbage | 卷心菜; 包菜; 圆白菜; 甘蓝 | Cabbage, raw
napa cabbage | i | napa cabbage; chinese cabbage; napa | 白菜; 大白菜 |
bok choy | i | bok choy; pak choi; baby bok choy; green vegetable; greens | 青菜; 小白菜; 上海青; 油菜 |
spinach | i | spinach | 菠菜 | Spinach, raw
lettuce | i | lettuce; romaine; romaine lettuce; cos lettuce | 生菜; 罗马生菜 | Lettuce, cos or romaine, raw
tomato | i | tomato; tomatoes | 番茄; 西红柿 | Tomatoes, red, ripe, raw, year round average
cucumber | i | cucumber; cucumbers | 黄瓜 | Cucumber, with peel, raw
avocado | i | avocado; avocados | 牛油果; 鳄梨 | Avocados, raw, all commercial varieties
mushroom | i | mushroom; mushrooms; button mushroom; white mushroom | 蘑菇; 口蘑; 白蘑菇 | Mushrooms, white, raw
shiitake | i | shiitake; shiitake mushroom; shiitake mushrooms; black mushroom | 香菇; 冬菇 |
enoki | i | enoki; enoki mushroom; enoki mushrooms | 金针菇 |
wood ear | i | wood ear; wood ear mushroom; black fungus | 木耳; 黑木耳 |
bell pepper | i | bell pepper; bell peppers; red bell pepper; green bell pepper; yellow bell pepper; red pepper; green pepper; capsicum; sweet pepper | 彩椒; 甜椒; 青椒; 红椒; 柿子椒 | Peppers, sweet, red, raw
chili | s | chili; chilli; chile; chili pepper; chilies; chillies; hot pepper; dried chili | 辣椒; 干辣椒; 小米辣; 尖椒 |
potato | i | potato; potatoes | 土豆; 马铃薯; 洋芋 | Potatoes, flesh and skin, raw
sweet potato | i | sweet potato; sweet potatoes; yam | 红薯; 地瓜; 番薯 |
eggplant | i | eggplant; aubergine; eggplants; aubergines | 茄子 |
zucchini | i | zucchini; courgette | 西葫芦 |
corn | i | corn; sweet corn; maize | 玉米; 玉米粒 |
green bean | i | green bean; green beans; string beans; french beans | 四季豆; 豆角; 芸豆 |
bean sprout | i | bean sprout; bean sprouts; sprouts | 豆芽; 绿豆芽; 黄豆芽 |
celery | i | celery | 芹菜; 西芹 |
lotus root | i | lotus root | 莲藕; 藕 |
bamboo shoot | i | bamboo shoot; bamboo shoots | 竹笋; 笋 |
pumpkin | i | pumpkin; squash | 南瓜 |
radish | i | radish; daikon; white radish | 萝卜; 白萝卜 |
kimchi | i | kimchi | 泡菜; 辣白菜 |
pickled mustard | i | pickled mustard greens; pickled vegetables; preserved vegetables | 酸菜; 榨菜; 梅干菜 |
seaweed | i | seaweed; nori; kelp; wakame | 海带; 紫菜; 裙带菜 |
peanut | i | peanut; peanuts | 花生; 花生米 |
cashew | i | cashew; cashews; cashew nuts | 腰果 |
chickpea | i | chickpea; chickpeas; garbanzo; garbanzo beans | 鹰嘴豆 | Chickpeas (garbanzo beans, bengal gram), mature seeds, cooked, boiled, without salt
black bean | i | black bean; black beans | 黑豆; 黑豆子 | Beans, black, mature seeds, cooked, boiled, without salt
lentil | i | lentil; lentils | 扁豆; 小扁豆 |
tomato puree | i | tomato puree; tomato sauce; passata; tomato paste | 番茄酱; 番茄泥; 番茄汁; 番茄酱汁 | Tomato products, canned, puree, without salt added
cream | i | cream; heavy cream; whipping cream | 淡奶油; 奶油 | Cream, fluid, heavy whipping
yogurt | i | yogurt; yoghurt; greek yogurt | 酸奶; 希腊酸奶 | Yogurt, Greek, plain, lowfat
cheese | i | cheese; mozzarella; cheddar | 芝士; 奶酪; 起司 |
parmesan | i | parmesan; parmesan cheese | 帕玛森; 帕玛森芝士 | Cheese, parmesan, hard
milk | i | milk | 牛奶; 奶 |
bread | i | bread; toast; baguette | 面包; 吐司 |
flour | s | flour; wheat flour | 面粉 |
cornstarch | s | cornstarch; corn starch; starch | 淀粉; 生粉; 玉米淀粉 |
soy sauce | s | soy sauce; light soy sauce; dark soy sauce; soya sauce; shoyu | 酱油; 生抽; 老抽 | Soy sauce made from soy and wheat (shoyu)
oyster sauce | s | oyster sauce | 蚝油 |
vinegar | s | vinegar; rice vinegar; black vinegar | 醋; 陈醋; 香醋 |
cooking wine | s | cooking wine; shaoxing wine; rice wine; mirin | 料酒; 黄酒; 绍兴酒 |
sesame | s | sesame; sesame seeds; sesame seed | 芝麻; 白芝麻 | Seeds, sesame seeds, whole, dried
cooking oil | s | oil; cooking oil; vegetable oil; soybean oil; peanut oil; canola oil | 食用油; 油; 植物油; 花生油; 大豆油 | Oil, vegetable, soybean, refined
olive oil | s | olive oil; extra virgin olive oil | 橄榄油 | Oil, olive, salad or cooking
sesame oil | s | sesame oil | 香油; 麻油; 芝麻油 | Oil, sesame, salad or cooking
chili oil | s | chili oil; chilli oil; hot oil | 辣椒油; 红油 |
butter | s | butter | 黄油 | Butter, without salt
salt | s | salt; sea salt | 盐; 食盐 |
sugar | s | sugar; rock sugar; brown sugar | 糖; 白糖; 冰糖; 红糖 |
pepper | s | black pepper; white pepper; ground pepper | 胡椒; 胡椒粉; 黑胡椒; 白胡椒 |
sichuan pepper | s | sichuan pepper; sichuan peppercorn; sichuan peppercorns; peppercorn | 花椒; 花椒粉 |
garlic | s | garlic; garlic cloves; minced garlic | 蒜; 大蒜; 蒜末; 蒜蓉; 蒜头 |
ginger | s | ginger; fresh ginger | 姜; 生姜; 姜片; 姜末 |
cilantro | s | cilantro; coriander; coriander leaves; fresh coriander | 香菜; 芫荽 |
star anise | s | star anise | 八角; 大料 |
msg | s | msg; monosodium glutamate | 味精; 鸡精 |
water | s | water | 水; 清水 |
stock | s | stock; chicken stock; bone broth | 高汤; 鸡汤; 骨汤 |
bean paste | s | bean paste; chili bean paste; doubanjiang; fermented bean paste; soybean paste | 豆瓣酱; 黄豆酱; 甜面酱; 大酱; 郫县豆瓣 |
miso | s | miso | 味噌 |
honey | s | honey | 蜂蜜 |
lemon | i | lemon; lemon juice | 柠檬; 柠檬汁 |
basil | i | basil; thai basil | 罗勒; 九层塔 |
coconut milk | i | coconut milk | 椰奶; 椰浆 |
pineapple | i | pineapple | 菠萝; 凤梨 |
mango | i | mango | 芒果 |
apple | i | apple | 苹果 |
plum | i | plum; sour plum | 乌梅; 梅子; 酸梅 |
plum drink | d | sour plum drink; plum drink; sour plum juice | 酸梅汤 |
drink | d | drink; beverage; juice | 饮品; 饮料; 果汁 |
hawthorn | i | hawthorn | 山楂 |
fried | c | fried; stir fried; stir-fried; stir fry; stir-fry; pan fried; deep fried; sauteed; wok fried | 炒; 爆炒; 小炒; 煎; 炸; 油炸; 干煸 |
braised | c | braised; red braised; red-braised; red cooked; braise | 红烧; 卤; 焖烧 |
steamed | c | steamed | 蒸; 清蒸 |
boiled | c | boiled; poached | 煮; 水煮; 白灼 |
roasted | c | roasted; roast; baked; grilled; bbq; barbecue; barbecued; char siu | 烤; 烧烤; 叉烧; 焗; 烘 |
cold | c | cold; chilled; iced | 凉; 冷; 冰镇; 冰 |
spicy | c | spicy; hot; hot and spicy; numbing; mala | 辣; 香辣; 麻辣; 酸辣 |
sweet and sour | c | sweet and sour; sweet & sour | 糖醋; 咕噜 |
kung pao | c | kung pao; gong bao; kung po | 宫保; 宫爆 |
mapo | c | mapo; ma po | 麻婆 |
teriyaki | c | teriyaki | 照烧 |
garlic sauce | c | fish fragrant; yu xiang; garlic sauce | 鱼香 |
twice cooked | c | twice cooked; twice-cooked | 回锅 |
shredded | c | shredded; julienne | 丝 |
diced | c | diced; cubed | 丁 |
sliced | c | sliced; slices | 片 |
minced | c | minced; ground | 末 |
signature | m | signature; special; specialty; famous; classic; classical; original; authentic; traditional; house; house special; homestyle; home style; home-style; homemade; chef's; chefs; chef; grandma's; grandma; mom's; secret; premium; deluxe; best; old; our; legendary; supreme; ultimate; favourite; favorite; delicious; tasty; fresh; hot selling; popular; must try; golden | 黄金; 招牌; 特色; 秘制; 精选; 家常; 经典; 正宗; 传统; 老; 特制; 独家; 私房; 美味; 好吃; 农家; 风味; 爆款; 必点; 人气; 匠心; 优质; 鲜香 |
filler | x | with; and; in; on; of; the; a; an; over; served; style; topped; dish; plate; set; combo; meal; mixed; assorted; sauce; dry weight; raw weight; cooked weight; &; w | 配; 和; 与; 加; 佐; 式; 份; 套餐; 拼; 的; 干重; 生重; 熟重; 酱汁; 汁 |
"""


# The concepts that make a dish what it is more than anything else on the plate: a kung pao chicken and a
# kung pao beef are two dishes, a kung pao chicken with or without carrot one (construct/dish_dedupe.py keys on them).
PROTEINS = frozenset({
    "chicken", "chicken thigh", "chicken wing", "duck", "beef", "ground beef", "pork", "pork belly", "ground pork",
    "pork rib", "lamb", "bacon", "ham", "sausage", "shrimp", "fish", "salmon", "tuna", "cod", "squid", "crab", "clam",
    "scallop", "tofu", "dried tofu"})


@dataclass(frozen=True)
class Term:
    concept: str
    kind: str  # i, s, d, c, m or x (see TERMS)
    fdc: str  # an SR Legacy description, or ""


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, Term], dict[str, Term], int, int]:
    """({English form: term}, {Chinese form: term}, longest English form in words, longest Chinese in chars)."""
    english: dict[str, Term] = {}
    chinese: dict[str, Term] = {}
    for line in TERMS.strip().splitlines():
        concept, kind, en, zh, fdc = (part.strip() for part in line.split("|"))
        term = Term(concept, kind, fdc)
        for form in filter(None, (f.strip().lower() for f in en.split(";"))):
            english.setdefault(" ".join(_latin_words(form)), term)
        for form in filter(None, (f.strip() for f in zh.split(";"))):
            chinese.setdefault(form, term)
    return (english, chinese, max(len(k.split()) for k in english), max(len(k) for k in chinese))


QUANTITY = re.compile(r"(?:约|about|approx\.?|~)?\s*\d+(?:[.,]\d+)?\s*(?:克|千克|公斤|毫升|升|个|片|只|份|勺|根|颗|块|"
                      r"(?:kg|g|grams?|ml|l|oz|lbs?|pcs?|pieces?|tbsp|tsp|cups?)(?![a-z]))?", re.I)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def _latin_words(text: str) -> list[str]:
    plain = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return re.findall(r"[a-z][a-z'&]*|&", plain.replace("-", " "))


def _singular(word: str) -> str:
    """A plain English singular, enough to make 'noodles' and 'noodle' one word.

    >>> [_singular(w) for w in ("noodles", "tomatoes", "dishes", "berries", "gas", "sauce")]
    ['noodle', 'tomato', 'dish', 'berry', 'gas', 'sauce']
    """
    if len(word) <= 3 or word.endswith("ss"):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("oes", "shes", "ches", "xes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def terms(text: str, glossary: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(concept, kind) of each food term in a dish name or an ingredient entry, in either language, with
    marketing and filler words dropped and quantities ignored; `glossary` (a text -> its English, e.g. the
    build's dish-name glossary) is read instead of the text when it has it. An unknown English word
    stays itself (kind "w"), a run of unknown Chinese characters too (kind "h").

    >>> terms("Signature Spicy Beef Noodles") == terms("招牌香辣牛肉面")
    True
    >>> terms("green onion pancake 200 g")
    [('scallion', 's'), ('pancake', 'd')]
    """
    text = " ".join(QUANTITY.sub(" ", text).split())
    text = (glossary or {}).get(text, text)
    english, chinese, most_words, most_chars = _tables()
    out: list[tuple[str, str]] = []
    for run in _CJK.split(text):  # English words: the longest known phrase first
        words = _latin_words(run)
        i = 0
        while i < len(words):
            for n in range(min(most_words, len(words) - i), 0, -1):
                head = words[i:i + n - 1]
                term = english.get(" ".join(head + [words[i + n - 1]])) or english.get(" ".join(head + [_singular(words[i + n - 1])]))
                if term is not None:
                    out.append((term.concept, term.kind))
                    i += n
                    break
            else:
                out.append((_singular(words[i].strip("'")), "w"))
                i += 1
    for run in _CJK.findall(text):  # Chinese: the longest known term first
        i, unknown = 0, False
        while i < len(run):
            n = next((n for n in range(min(most_chars, len(run) - i), 0, -1) if run[i:i + n] in chinese), 0)
            if n:
                out.append((chinese[run[i:i + n]].concept, chinese[run[i:i + n]].kind))
            elif unknown:
                out[-1] = (out[-1][0] + run[i], "h")
            else:
                out.append((run[i], "h"))
            unknown = not n
            i += n or 1
    return [(c, kind) for c, kind in out if kind not in ("m", "x") and c]


def fdc_description(text: str, glossary: Mapping[str, str] | None = None) -> str | None:
    """The SR Legacy description of the food an ingredient entry names, when the table gives one: its
    last food concept that has one (the head of the name: 鸡蛋面 and "egg noodles" are noodles).

    >>> fdc_description("虾仁 80克")
    'Crustaceans, shrimp, raw'
    >>> fdc_description("鸡蛋面 200克")
    'Noodles, egg, cooked, enriched, with added salt'
    >>> fdc_description("secret sauce") is None
    True
    """
    by_concept = _by_concept()
    found = [by_concept[c].fdc for c, _ in terms(text, glossary) if c in by_concept and by_concept[c].fdc]
    return found[-1] if found else None


@lru_cache(maxsize=1)
def _by_concept() -> dict[str, Term]:
    english, chinese, _, _ = _tables()
    return {t.concept: t for t in (*english.values(), *chinese.values())}
