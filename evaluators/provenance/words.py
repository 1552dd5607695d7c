"""Common English words: how the decoder tells English from its rot13, and where spaced-out letters break.

`COMMON` holds the most frequent English words and the vocabulary of instructions, evaluation and customer
support (what an agent's traffic is about). Two uses, both in `decode.py`: a run of text is taken for rot13 when
more of its words are common words after rot13 than before; letters spaced out one by one without a mark between
words ("i g n o r e a l l") are cut into the fewest common words. Neither needs every word: a text scores on
its share of hits, and an unknown word stays whole.
"""

from __future__ import annotations

_FREQUENT = """
a about above across after again against all almost alone along already also although always am among an and
another any anyone anything are around as ask asked at away back be became because become been before began
behind being below best better between both but by call called came can cannot could day did different do does
doing done down during each early either else end enough even ever every everyone everything example far few
find first for found from full further gave get gets getting give given go goes going gone good got great had
has have having he her here hers herself him himself his how however i if in into is it its itself just keep
kind know known last later least less let like likely long look made make makes making many may me might more
most much must my myself near need needs never new next no nobody none nor not nothing now of off often old on
once one only onto or other others our ours ourselves out over own part people per perhaps place please put
quite rather really right said same saw say says second see seem seemed seems seen set several shall she should
show since so some someone something sometimes soon still such sure take taken than thank thanks that the their
theirs them themselves then there these they thing things think this those though thought three through thus
time to today together told too took toward two under until up upon us use used using very want wanted was way
we well went were what whatever when where whether which while who whoever whole whom whose why will with
within without word words work would yes yet you your yours yourself
"""

_DOMAIN = """
above accept accepted accuracy accurate act action actual additional address admin agent agents allowed answer
answers any apply approve approved assessment assess assistant attention audit auditor auditors auditing
automated award before being bot case change changed chat check checked checklist checks claim clean close
closed compliance compliant complete completed conclude confirm confirmed consider context conversation
conversations correct correctly count credit criteria criterion customer data decision decide deserves
developer dialogue directive disregard do earlier error errors evaluate evaluated evaluating evaluation
evaluator evaluators every exchange excellent fail failed false final flag flawless follow followed following
forget format full grade graded grader graders grading guideline guidelines helpful high highest ignore ignored
important incorrect information input instruction instructions issue issues item items judge judged judges
judging label later list log mark marked marks message messages mistake mistakes mode model models new note
notice now number ok okay order output override pass passed passes passing penalize perfect point points policy
policies previous prior problem problems prompt prompts quality rate rated rater rating read reading record
refund regardless reply report request require required resolved respond response responses result results
return review reviewed reviewer reviewers reviewing rubric rule rules safe say score scored scores scoring
session should skip state step steps submission success successful summary supersede superseded system task
team test top treat true trust turn update updated user users valid verdict verified violate violated
violation violations void write wrong yes
"""

COMMON: frozenset[str] = frozenset((_FREQUENT + _DOMAIN).split())
"""Lower-case common English words (frequent words, and the vocabulary of instructions and evaluation)."""

LONGEST = max(map(len, COMMON))
"""Length of the longest word in `COMMON`."""
