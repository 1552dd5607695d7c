"""The regular expressions of the sentence forms (`factory.compile.patterns` reads sentences with them).

English: the modals (never / should not / must not ... / should / must / a numeric limit), the only-forms, the
conditions (`if`, `when`, `before`, `unless`, `in X mode`), connectives a main clause may open with. Chinese: the
modals (必须 / 不得 / 永远不要 / 应当 / 最多N ...), 只有…才, 除非…否则, 如果…就, 在…之前, …模式下.
"""

from __future__ import annotations

import re

NUMBERS = {
    "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20,
    "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
}
EN_NUM = r"(?:\d+|a\s+single|single|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty)"
ZH_NUM = r"(?:\d+|[一两二三四五六七八九十])"

# ---- English ---------------------------------------------------------------------------------------------

EN_NEVER = (r"never|must\s+never|should\s+never|shall\s+never|under\s+no\s+circumstances?(?:\s+(?:should|must|may|can|"
            r"will|do|shall)(?:\s+(?:you|the\s+agent|the\s+assistant|it))?)?|at\s+no\s+(?:time|point)|"
            r"in\s+no\s+(?:case|event)|not\s+under\s+any\s+circumstances?")
EN_SHOULD_NOT = r"should\s+not|shouldn['’]t|ought\s+not\s+to"
EN_NEG = (r"must\s+not|mustn['’]t|shall\s+not|cannot|can\s+not|can['’]t|may\s+not|"
           r"do\s+not|don['’]t|(?:is|are)\s+not\s+(?:allowed|permitted)\s+to|(?:is|are)\s+(?:forbidden|prohibited)"
           r"\s+(?:to|from)")
EN_SHOULD = r"should|ought\s+to"
EN_MUST = (r"must|shall|needs?\s+to|ha(?:ve|s)\s+to|(?:is|are)\s+required\s+to|requires?|"
           r"it\s+is\s+(?:important|essential|critical|crucial|vital|mandatory|necessary|required)\s+(?:that|to)|"
            r"(?:is|are)\s+(?:needed|required|mandatory)|^\W*always")
EN_LIMIT_WORDS = (rf"(?:at\s+most|no\s+more\s+than|not\s+more\s+than|a\s+maximum\s+of|up\s+to|at\s+least|"
             rf"a\s+minimum\s+of|not\s+exceed(?:ing)?)\s+{EN_NUM}\b")
EN_MODAL = re.compile(
    rf"(?P<never>\b(?:{EN_NEVER})\b)|(?P<shouldnot>\b(?:{EN_SHOULD_NOT})\b)|(?P<neg>\b(?:{EN_NEG})\b)"
    rf"|(?P<should>\b(?:{EN_SHOULD})\b)|(?P<must>\b(?:{EN_MUST})\b)|(?P<limit>\b{EN_LIMIT_WORDS})",
    re.IGNORECASE,
)
EN_LIMIT = re.compile(
    rf"\b(?:at\s+most|no\s+more\s+than|not\s+more\s+than|a\s+maximum\s+of|up\s+to|not\s+exceed(?:ing)?)\s+"
    rf"(?P<n>{EN_NUM})\s+"
    r"(?P<noun>(?:(?!(?:and|or|per|in|for|on|each|at|of|to|with)\b)[A-Za-z-]+\s*){1,3})",
    re.IGNORECASE,
)
EN_ONLY = re.compile(r"\b(?:can|may|could)\s+only\b|^\W*only\b|\bonly\s+(?:if|when|after|once|while)\b", re.I)
EN_BUT_NOT = re.compile(r"^(?P<s>.*?)\b(?:can|may|could)\s+(?P<x>(?:(?!\bbut\b).)+?)\s*,?\s+but\s+(?P<neg>never|not|"
                         r"cannot|can['’]t|may\s+not|must\s+not)\s+(?P<y>.+)$", re.I)
EN_NOTHING_ELSE = re.compile(r"\s*,?\s+but\s+nothing\s+(?:else|more)\W*$", re.I)
EN_MAY = re.compile(r"\b(?:can|may|could)\s+", re.I)
EN_UNLESS_LEAD = re.compile(r"^\W*unless\s+(?P<c>[^,]+?)\s*,\s*(?P<b>.+)$", re.I)
EN_MODE_LEAD = re.compile(r"^\W*(?P<c>(?:in|under|during)\s+(?:the\s+)?[\"'“]?[A-Za-z][\w-]*[\"'”]?\s+mode)"
                          r"\s*,\s*(?P<m>.+)$", re.I)
EN_MODE_TAIL = re.compile(r"^(?P<m>.+?)\s*,?\s+(?P<c>(?:(?:when|while)\s+)?(?:in|under|during)\s+(?:the\s+)?"
                           r"[\"'“]?[A-Za-z][\w-]*[\"'”]?\s+mode)\s*$", re.I)
# A condition ends where a new clause with its own modal starts ("..., and business flights can always ...").
EN_COND_END = re.compile(r"\s*;|,\s+(?:and|but)\s+(?=(?:[\w'’-]+\s+){0,4}?(?:can|could|may|will|would|must|should|"
                          r"cannot|can['’]t|won['’]t|shall)\b)", re.I)
EN_AND = re.compile(r"\s*,?\s+and\s+", re.I)
LIGHT_VERBS = frozenset({"take", "make", "do", "give", "have", "get", "pay", "place", "put"})
PARTICLES = frozenset({"up", "out", "off", "back", "over", "down", "away", "in", "on"})
EN_IFF = re.compile(r"\s*,?\s*\bif\s+and\s+only\s+if\b\s*", re.I)
EN_UNLESS = re.compile(r"\s*,?\s*\b(?:unless|except\s+(?:when|if|where))\b\s*", re.I)
EN_WITHOUT = re.compile(r"\s+\bwithout\s+", re.I)
EN_ONLY_COND = re.compile(r"\s*,?\s*\bonly\s+(?:if|when|after|once|while)\b\s*", re.I)
EN_ONLY_LEAD = re.compile(r"^\W*only\s+(?P<b>.+?)\s*,?\s+\b(?:if|when|after|once|while)\s+(?P<c>.+)$", re.I)
EN_CAN_ONLY = re.compile(r"\b(?:can|may|could)\s+only\s+|^\W*only\s+(?=[a-z])", re.I)
EN_BEFORE_LEAD = re.compile(r"^\W*before\s+", re.I)
EN_BEFORE = re.compile(r"\s+\bbefore\s+", re.I)
EN_IF_LEAD = re.compile(r"^\W*(?:if|when|whenever|once|in\s+case)\s+", re.I)
EN_IF = re.compile(r"\s*,?\s+\b(?:if|when|whenever)\s+", re.I)
ASKING = re.compile(r"\b(?:ask|asks|asking|asked|whether|know|check|see|tell|find\s+out|confirm|wonder)\s*$", re.I)
EN_CONNECTOR = re.compile(r"^(?:otherwise|also|however|then|and|but|so|therefore|thus|hence|in\s+addition|"
                           r"additionally|instead|generally|usually|in\s+general|in\s+particular|finally|please|"
                           r"as\s+an?\s+[^,]{1,40},|for\s+[^,]{1,40},|in\s+[^,]{1,40},|at\s+[^,]{1,40},)\s*,?\s+",
                           re.I)
EN_SO = re.compile(r"^.*?,\s+(?:so|therefore|thus|hence)\s+", re.I)

# ---- Chinese ---------------------------------------------------------------------------------------------

ZH_NEVER = r"永远不要|永远不得|绝不|绝对不要|绝对不能|从不|决不"
ZH_LIMIT_WORDS = rf"(?:最多|至多|不得超过|不能超过|不超过|最多只能|至少|最少|不少于)[\u4e00-\u9fff]{{0,3}}?{ZH_NUM}"
ZH_SHOULD_NOT = r"不应该|不应当|不应|最好不要|尽量不要|尽量避免"
ZH_NEG = r"不得|不要|不可以|不可|不准|不许|禁止|严禁|切勿|不能|勿"
ZH_SHOULD = r"应当|应该|最好|尽量"
ZH_MUST = r"必须|务必|一定要|需要先|需先|总是|始终"
ZH_MODAL = re.compile(
    rf"(?P<limit>{ZH_LIMIT_WORDS})|(?P<never>{ZH_NEVER})|(?P<shouldnot>{ZH_SHOULD_NOT})|(?P<neg>{ZH_NEG})"
    rf"|(?P<should>{ZH_SHOULD})|(?P<must>{ZH_MUST})"
)
ZH_LIMIT = re.compile(
    rf"(?:最多|至多|不得超过|不能超过|不超过|最多只能)\s*(?P<verb>[\u4e00-\u9fff]{{0,3}}?)\s*(?P<n>{ZH_NUM})\s*"
    r"(?P<noun>(?:个|名|位|张|次|条|句|段|项|份)?[\u4e00-\u9fff]{0,6})"
)
ZH_ONLY = re.compile(
    r"^(?:只有当|只有在|只有|仅当|仅在|仅有)(?P<c>.+?)(?:的时候|时|之后|后)?[，,]?\s*(?:才能|才可以|才可|才|方可)(?P<b>.+)$"
)
ZH_ONLY_WHEN = re.compile(r"^(?:仅当|只有当|仅在|只有在)(?P<c>.+?)(?:的时候|时)[，,]\s*(?P<b>.+)$")
ZH_ONLY_CAN = re.compile(r"^(?P<s>.*?)(?:只能|只可以|仅能|仅可)在(?P<c>.+?)(?:的时候|时|之后|后)(?P<b>.+)$")
# 只回答X / 用户只能修改X: the verb (two characters, as most are) is the behaviour, X what it is restricted to.
ZH_ONLY_VERB = re.compile(r"^(?P<s>[^，,。]*?)(?:只能|只可以|仅能|仅可|(?<![有])只(?![有要是])|仅(?![有当在]))"
                          r"(?P<v>[\u4e00-\u9fff]{2})(?P<o>[^，,。].*)$")
ZH_UNLESS_LEAD = re.compile(r"^除非(?P<c>.+?)[，,]\s*否则(?P<b>.+)$")
ZH_UNLESS_TAIL = re.compile(r"^(?P<b>.+?)[，,]\s*除非(?P<c>.+)$")
ZH_BEFORE = re.compile(r"^(?:在)?(?P<c>.+?)(?:之前|以前)[，,]?\s*(?P<m>.+)$")
ZH_IF = re.compile(r"^(?:如果|若是|若(?!干)|假如|一旦|当(?![前天日月年中然地初时]))(?P<c>.+?)"
                   r"(?:的时候|的话|时)?[，,]\s*(?:那么|就|则|那)?(?P<m>.+)$")
ZH_SCOPE = re.compile(r"^(?P<c>[^，,。]{1,20}?(?:模式下|情况下|下|时|的时候|中))[，,]\s*(?P<m>.+)$")
ZH_IF_JIU = re.compile(r"^(?:如果|若(?!干)|假如|一旦)(?P<c>.+?)(?:就|则)(?P<m>.+)$")
ZH_LEAD = re.compile(r"^(?:否则|另外|此外|同时|并且|而且|并|且|就|则|那么)[，,]?\s*")
