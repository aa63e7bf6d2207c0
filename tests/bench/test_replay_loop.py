"""The replay runs the decoder's own round loop: an answer recorded live and replayed under
the same prices gives the live run's rounds back, choice for choice."""

from __future__ import annotations

import copy

from specchat.bench.hindsight.recorded_target import VirtualClock
from specchat.bench.hindsight.replay import read_costs, replay_rounds
from specchat.bench.live.trace import record_trace
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import AUTO
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import Controls, GenerationRequest, StopReason
from specchat.tinymodels import TinyModels
from tests.helpers.priced import PricedModel
from tests.helpers.traces import COPIED_CODE_PROMPT, round_choices


def test_a_replayed_answer_gives_the_live_rounds_back_choice_for_choice(
    tiny_models: TinyModels,
) -> None:
    costs = read_costs("gpu")  # where drafting pays, auto's choices vary round to round
    costs.target.seen = dict.fromkeys(costs.target.pass_ms, 1)  # as replay() prices
    clock = VirtualClock()
    with LlamaModel(tiny_models.target, n_ctx=2048) as model:
        priced = copy.deepcopy(costs)
        pair = LoadedPair.of(
            PricedModel(model, priced, clock),  # type: ignore[arg-type]
            None,
            costs=priced,
            clock=clock,
        )
        decoder = SpeculativeDecoder(pair, auto=AutoPolicy(gpu=priced.target.gpu, costs=priced))
        prompt = tuple(model.tokenize(COPIED_CODE_PROMPT))
        request = GenerationRequest(prompt, max_tokens=120, controls=Controls(mode=AUTO))
        live = [r for r in decoder.generate(request) if r.rows]
    assert live[-1].stop == StopReason.MAX_TOKENS  # the recorded answer ends where live did
    answer = [e.token for r in live for e in r.events]
    margins = [e.margin for r in live for e in r.events]
    trace = record_trace("copy", prompt, answer, margins=margins)

    replayed = replay_rounds(trace, costs)

    assert sum(r.accepted for r in live) > 10  # auto did draft, and not only one way
    assert len({r.choice.mode for r in live}) > 1
    assert round_choices(replayed) == round_choices(live)
