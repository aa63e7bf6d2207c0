"""What `auto` believes before it has measured or learnt anything, and how fast it learns:
every prior and tuning figure of pricing, each said once, with where it came from.

Rounds and the background measurement move every estimate away from these; the figures
themselves change only with a new measurement, named beside each (docs/costs.md holds the
measurements and the replays behind them). The modules that use them import them from here.
"""

from __future__ import annotations

# --- draft lengths --------------------------------------------------------------------------

#: Longest draft of a fixed K (the window's slider) and of the draft model under `auto`.
MAX_K = 16

#: Longest draft under `auto`. Prompt-lookup drafts cost nothing to make, and on a CPU a
#: target pass's cost per row keeps falling with its size (≈ 36 ms for one token, ≈ 20 ms a
#: row at 16, ≈ 13 ms at 64 on a 2-core laptop), so a long copy is checked fastest in big
#: batches; the auto policy only asks for them where the match says the copy will go on.
MAX_LOOKUP_K = 64

# --- the policy -----------------------------------------------------------------------------

#: Expected gain over plain the draft model must promise before it is used: none. Its
#: estimate follows every written token (model_acceptance.py), so it is not one that came
#: out high on the few rounds that chose it; being used is how it calibrates that estimate;
#: and leaving it costs a catch-up on return, which its offer prices over the rounds the
#: answer has left.
HURDLE = 0.0
#: The hurdle of a drafter whose acceptance is learnt at every position, drafted or not (a
#: copy is scored against the text that follows it): waiting for a clear case costs it no
#: knowledge, and its marginal cases are the ones its estimate overrates, since they are
#: chosen where the estimate came out high (docs/costs.md: replayed over 74 answers, 0.2
#: rather than 0.1 left far fewer answers below plain at the same geometric mean).
SCORED_HURDLE = 0.2

#: Share of decoding time that probing may cost: a probe is made only when its expected
#: extra cost is at most this share of the plain time since the last one. Its one-off part
#: (a draft model catching up on text it has not seen) must also fit this share of the plain
#: time of the answer so far: spread over many answers a catch-up of a thousand tokens fits
#: the budget, yet all of it lands on the one answer that probes (a 1.1 s catch-up 118
#: tokens into an answer cost that answer 9 %).
PROBE_BUDGET = 0.03

#: Rounds over which auto spreads a one-off cost (a draft model's catch-up over text written
#: while it sat out) when pricing a drafter: the catch-up is paid once, and the rounds after
#: it draft with a cache in step. Charging it all to one round would keep a drafter that
#: pays out for good, since its catch-up only grows while it is not used. Near the end of an
#: answer's budget fewer rounds can follow, and the cost is spread over those only.
CATCHUP_ROUNDS = 8

#: Rounds after which `auto` makes a plain round to time one token again, whatever the
#: offers: every price is a shape times one token's time, and only a plain round shows that
#: time. Without it a table measured while the machine was busy (one token timed slow, so
#: every larger pass looked cheap next to it) was never corrected while drafting went on.
REFERENCE_ROUNDS = 32

# --- the target's pass (shape × scale; engine/costs/table.py) --------------------------------

#: Relative cost of one more row in a pass on a GPU before anything is measured: extra rows
#: are nearly free until the GPU is compute-bound.
PRIOR_GPU_ROW_SLOPE = 0.05

#: A CPU pass over n tokens (logits for every row) as a multiple of one token, before this
#: machine's sizes are measured: the powers of two measured for the 1.5B Q4_K_M target on a
#: 2-core CPU (resources/costs/cpu-2core-qwen1.5b-q4_k_m.json), linear in between.
PRIOR_CPU_SHAPE = ((1, 1.0), (2, 1.63), (4, 2.61), (8, 4.56), (16, 5.16), (32, 9.21), (64, 17.5))

#: A pass never costs less than this share of a pass over fewer rows: kernel structure makes
#: the curve jagged, by a half at most (docs/costs.md). A smaller pass dearer than that was
#: measured stalled: it is priced from the larger one by the prior's shape and measured again.
FLOOR = 0.5

#: Spread (standard deviation, in cached tokens) of the depths plain rounds ran at before the
#: line through their times sets the slope: closer together, timing noise swamps the growth.
SLOPE_FIT_SPREAD = 128

#: A real round moves its price this far toward what it took (geometrically: 0.5 is halfway).
GAIN = 0.5
#: A real round counts as at most this many times its price, or this share of it: one stall
#: moves a price by a factor of two at most.
CLIP = 4.0

# --- a drafter's own time before it is measured ----------------------------------------------

#: Before any measurement, a draft model is typically a third of the target's cost a token.
UNMEASURED_DRAFT_SHARE = 3.0
#: Before measuring a draft model's batched catch-up, its time per token of text it has not
#: seen is this share of a drafted token's: one batched pass costs a fraction of decoding
#: token by token (the catch-up rate measured since: CostTable.catchup_row_ms).
UNMEASURED_CATCHUP_SHARE = 0.3
#: Before any measurement, a head over the target's hidden state drafts a token in an eighth
#: of one target token's time: a head is one layer, a small share of the target's.
UNMEASURED_HEAD_SHARE = 8.0

# --- acceptance: counts a drafter's estimate starts from (engine/drafting/base.py) ----------

#: Weight of an acceptance prior, in rounds: two rounds' worth, so the first real rounds
#: move it most of the way.
PRIOR_WEIGHT = 2.0
#: How fast a drafter's round-counted acceptance forgets (per round): acceptance changes with
#: the kind of text being written, and rounds spent on a drafter that stopped paying are lost.
ROUND_DECAY = 0.9
#: (first token, later ones) a drafter without a prior of its own starts from: even odds.
DRAFTER_PRIOR = (0.5, 0.5)
#: A same-family draft model usually agrees more often than not; every written token teaches
#: it from there (see engine/drafting/model_acceptance.py).
DRAFT_MODEL_PRIOR = (0.6, 0.6)
#: A head trained on the target's own hidden state agrees with it more often than a separate
#: draft model does.
HEAD_PRIOR = (0.7, 0.6)

# --- the draft model (engine/drafting/model.py, model_acceptance.py) --------------------------

#: The draft model stops a draft at a token it gives less than this probability (after the
#: first). Measured on the default pair (Qwen2.5-Coder 0.5B drafting for 1.5B, 354 positions
#: of six bench answers, tests/bench/data): below 0.4 its argmax was the target's choice 45 %
#: of the time, from 0.4 to 0.8 about 80 %, above 0.8 98 %. A token kept less than half the
#: time costs a drafted token and a verified row for less than half a token: on a GPU, where
#: the draft model pays, that is below the rate of the round it would lengthen.
MIN_CONFIDENCE = 0.4

#: Lower margin edges of the bands the calibration learns agreement in.
MARGIN_BANDS = (0.0, 1.0, 2.0, 3.0, 5.0, 8.0)
#: Weight of each band's prior (σ of its lower edge), in drafted positions. The calibration is
#: the pair's, not the text's, so it never ages: a few dozen drafted positions settle it.
CALIBRATION_WEIGHT = 4.0
#: Per written token: how fast the text's agreement is forgotten (about the last twenty
#: tokens: a sentence, a line or two of code).
TEXT_DECAY = 0.95
#: Lower edges of the bands the draft model's confidence calibration learns in.
CONFIDENCE_BANDS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99)

# --- copies (engine/drafting/copy_acceptance.py) ----------------------------------------------

#: Lower bounds of the match-length buckets for prompt lookup's acceptance estimate: how far
#: back the text agrees with the copied source predicts how far forward it will go on.
LOOKUP_EXTENTS = (1, 2, 3, 4, 8, 16, 32)
#: Prior acceptance of the first lookup token and of each later one, per bucket: measured
#: over the shipped bench prompts' answers (a one-token match is kept a quarter of the time,
#: a 32-token one almost always, and then runs on for twenty-odd tokens).
LOOKUP_PRIOR_FIRST = (0.25, 0.45, 0.65, 0.75, 0.85, 0.95, 0.97)
LOOKUP_PRIOR_CONTINUED = (0.6, 0.7, 0.75, 0.8, 0.9, 0.95, 0.96)
#: The same priors for a copy of the answer's own earlier text (a repeated line, a stanza, a
#: list item's pattern): the answer echoes itself and then varies, so such copies are kept
#: less often and break sooner than copies of text it was given, at every match length
#: (docs/costs.md, "Copies of the answer itself").
OWN_PRIOR_FIRST = (0.23, 0.35, 0.6, 0.6, 0.8, 0.9, 0.9)
OWN_PRIOR_CONTINUED = (0.45, 0.6, 0.65, 0.7, 0.85, 0.9, 0.9)
#: Lookup acceptance is scored at every position (see LookupLedger), so its memory is counted
#: in tokens of text: about the last hundred.
LOOKUP_DECAY = 0.99
#: Weight of the lookup priors, in proposals: they never age (see LookupSurvival).
LOOKUP_PRIOR_WEIGHT = 5.0
#: First draft positions (1-based) of the bands that share one refusal rate in a lookup
#: bucket's survival estimate: positions far out are reached rarely, so they pool their counts.
LOOKUP_BANDS = (1, 2, 3, 5, 9, 17, 33)

#: The target was sure of a token when its top logit led the runner-up by at least this
#: (about a 99 % top probability on a 150k-token vocabulary).
SURE_MARGIN = 5.0
#: Prior odds of keeping a copied token, relative to the match-length priors above, after a
#: token the target was sure of and after one it hesitated over: (first token, later ones).
#: Measured over answers at T = 0 (code edits, extraction, explanations, prose): a 2–3-token
#: match's first token is kept 58 % of the time after a sure token and 37 % after an unsure
#: one (the priors, 45–65 %, pool both); 4–7-token matches 81 % and 65 %; one-token matches
#: 28 % and 17 %. Once a copy's first token is kept, the next ones are kept as often as the
#: priors say after a sure token (67–80 %), and less often after an unsure one (55–65 %).
SURE_ODDS = (1.4, 1.0)
UNSURE_ODDS = (0.55, 0.55)
UNKNOWN_ODDS = (1.0, 1.0)

#: When sampling, how fast the mean of the written tokens' probabilities forgets (per token:
#: about the last fifty count), and its prior (a mean of 1, worth this many tokens): see
#: CopyAcceptance.ceiling.
SAMPLED_DECAY = 0.98
SAMPLED_PRIOR_WEIGHT = 2.0

#: Stored estimates (engine/drafting/stored_estimates.py): the format's version. A file of
#: another version is ignored; raise it whenever a stored estimate's fields, or the priors
#: its counts were added to, change.
ESTIMATES_VERSION = 1
#: An estimate is stored only where the session added at least this many observations to it
#: (drafted or written tokens, rounds): fewer say more about the session than the pair.
ESTIMATES_MIN_OBSERVED = 16
#: The most observations one session may add to a stored estimate: more are scaled down to
#: this, so an odd session moves what was stored by a bounded amount. Chosen, not measured:
#: about two long answers.
ESTIMATES_SESSION_CAP = 256.0
#: The most observations a stored count estimate (a calibration) holds: older counts shrink
#: so that recent sessions keep their say. Chosen, not measured.
ESTIMATES_STORED_CAP = 1024.0
