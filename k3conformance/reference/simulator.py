"""The simulated Kimi K3 model: a pure, deterministic function of (profile, request body)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from k3conformance.datasets.long_prompts import needle_answer
from k3conformance.reference import agent_play, recall
from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.answer_key import AnswerKey
from k3conformance.reference.difficulty import solve_chance
from k3conformance.reference.faults import PrefixCache
from k3conformance.reference.long_reader import read_long_task
from k3conformance.reference.prompt import (
    TOKENS_PER_MESSAGE,
    message_text,
    prompt_tokens,
    rendered_prompt,
    rendered_reasoning,
)
from k3conformance.reference.request import parse_request
from k3conformance.reference.schema_values import UnsupportedSchema, example_value
from k3conformance.reference.tool_use import plan_tool_calls
from k3conformance.reference.values import (
    K3_THINKING_SAMPLING,
    ChatRequest,
    FixtureItem,
    InvalidRequest,
    Profile,
    SimulatedTurn,
    ToolCall,
)
from k3conformance.reference.words import count_tokens, generic_reply, reasoning_text, take_tokens, wrong_variant

if TYPE_CHECKING:
    from k3conformance.agent.tasks import AgentTask

__all__ = ["Simulator"]

# Where a loop stops when the request sets no max_tokens: a server's default budget.
_UNLIMITED_LOOP_TOKENS = 32768
# The agentic coding suite's accuracy key in a profile's suite_accuracy.
AGENT_SUITE = "agentic_coding"


def _digest(*parts: object) -> int:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "big")


def _unit_draw(*parts: object) -> float:
    return _digest(*parts) / 2**64


class Simulator:
    def __init__(self, profile: Profile, answer_key: AnswerKey, model_id: str) -> None:
        self.profile = profile
        self.answer_key = answer_key
        self.model_id = model_id

    def complete(self, body: Mapping[str, Any], prefix_cache: PrefixCache | None = None) -> SimulatedTurn:
        """The answer to `body`; `prefix_cache` is the app's state for prefix-cache-corruption, else None."""
        faults = self.profile.faults
        request = fault_hooks.on_request(faults, parse_request(body, self.model_id, faults))
        request_seed = self._request_seed(body, request)
        rng = random.Random(request_seed)
        question = next((message_text(m) for m in reversed(request.messages) if m["role"] == "user"), "")
        item = self.answer_key.lookup(question) if question else None
        corrupted = prefix_cache is not None and prefix_cache.reuses_prefix(_prompt_text(request))
        correct = item is not None and not corrupted and self.answers_correctly(item, request.seed)
        reasoning = ""
        mean_words = self.profile.reasoning_words[request.effort]
        if request.thinking:
            reasoning = reasoning_text(rng, question, max(1, round(mean_words * rng.uniform(0.8, 1.2))))
        task = agent_play.agent_task(request)
        if task is not None:
            return self._agent_turn(request, task, rng, request_seed, question, mean_words)
        reasoning, recalled = recall.on_turn(rng, question, reasoning, rendered_reasoning(request))
        # A retrieval question is answered from what the template rendered: the prompt, and
        # the earlier turns' reasoning where it is kept.
        retrieved = needle_answer(rendered_prompt(request)) if item is None and question else None
        long_task = read_long_task(question) if item is None and question else None
        if recalled is not None and item is None:
            reply = recalled
        elif long_task is not None:
            # A generated long-context task (datasets/long_tasks.py): the reader computes the
            # answer from the prompt, and the item's own difficulty decides whether this
            # sample finds it, as for any graded item; a miss names a distractor instead.
            key = long_task.key
            right = _unit_draw(key, request.seed) < self.solve_chance(key, self.profile.accuracy)
            reply = long_task.reply(right and not corrupted)
        elif retrieved is not None:
            # A long-context retrieval probe: the needle is in the prompt, so the answer is too.
            # Finding a needle in a long prompt is the long-context skill the profile's
            # accuracy stands for; recalling a short earlier turn is not, and never fails.
            long_context = needle_answer(question) is not None
            draw = _unit_draw("retrieval", question[-200:], request.seed)
            chance = self.solve_chance(f"retrieval/{question[-200:]}", self.profile.accuracy)
            right = not corrupted and (not long_context or draw < chance)
            reply = retrieved if right else wrong_variant(rng, retrieved)
        elif item is None:
            reply = generic_reply(rng)
            if corrupted:
                reply = wrong_variant(rng, reply)
        elif correct:
            reply = item.reply
        else:
            reply = item.wrong_reply if item.wrong_reply is not None else wrong_variant(rng, item.reply)
        calls_in_history = sum(len(m.get("tool_calls") or ()) for m in request.messages if m["role"] == "assistant")
        first_index = fault_hooks.first_tool_call_index(faults, calls_in_history)
        leaked_markup = fault_hooks.tool_markup_without_tools(faults, request, item)
        try:
            planned = plan_tool_calls(request, question, item, faults)
            content: str | None
            if planned:
                content = None
            elif leaked_markup is not None:
                content = leaked_markup
            else:
                content = self._content(request, item if correct else None, reply)
        except (UnsupportedSchema, SchemaError) as error:
            raise InvalidRequest(400, f"unusable JSON schema: {getattr(error, 'message', error)}") from error
        calls = tuple(
            ToolCall(f"functions.{name}:{first_index + offset}", name, json.dumps(arguments, ensure_ascii=False))
            for offset, (name, arguments) in enumerate(planned)
        )
        return self._finish(request, rng, request_seed, reasoning, content, calls)

    def _agent_turn(
        self,
        request: ChatRequest,
        task: AgentTask,
        rng: random.Random,
        request_seed: int,
        question: str,
        mean_words: int,
    ) -> SimulatedTurn:
        """One turn of the scripted agent; right or wrong per (task, seed), as other items are."""
        correct = _unit_draw(task.id, request.seed) < self.solve_chance(task.id, self.profile.accuracy_for(AGENT_SUITE))
        action = agent_play.next_action(request, task, correct, mean_words)
        reasoning = ""
        if request.thinking:
            reasoning = reasoning_text(rng, question, max(1, round(action.thinking_words * rng.uniform(0.8, 1.2))))
        calls_in_history = sum(len(m.get("tool_calls") or ()) for m in request.messages if m["role"] == "assistant")
        index = fault_hooks.first_tool_call_index(self.profile.faults, calls_in_history)
        call = ToolCall(f"functions.{action.name}:{index}", action.name, action.arguments_json)
        return self._finish(request, rng, request_seed, reasoning, None, (call,))

    def _finish(
        self,
        request: ChatRequest,
        rng: random.Random,
        request_seed: int,
        reasoning: str,
        content: str | None,
        calls: tuple[ToolCall, ...],
    ) -> SimulatedTurn:
        """The planned answer within the budget, unless its length makes a faulty kernel loop
        or its context makes faulty decoding drift into gibberish."""
        faults = self.profile.faults
        planned = count_tokens(reasoning) + count_tokens(content or "") + sum(count_tokens(c.arguments) for c in calls)
        draw = _unit_draw("loop", request_seed)
        if fault_hooks.falls_into_loop(faults, planned, prompt_tokens(request), draw):
            # A loop runs until the budget, the server's default when the request sets none.
            budgeted = dataclasses.replace(request, max_tokens=request.max_tokens or _UNLIMITED_LOOP_TOKENS)
            looping = fault_hooks.looping_reasoning(rng, reasoning, budgeted.max_tokens or 0)
            return fault_hooks.on_completion(faults, _within_budget(budgeted, looping, "", ()))
        completion = _within_budget(request, reasoning, content, calls)
        onset = fault_hooks.drift_onset(faults, _unit_draw("drift", request_seed))
        if onset is not None:
            completion = fault_hooks.drifted(completion, onset, rng)
        if not fault_hooks.usage_counts_tools(faults):
            completion = dataclasses.replace(completion, prompt_tokens=prompt_tokens(request, with_tools=False))
        return fault_hooks.on_completion(faults, completion)

    def prompt_words(self, body: Mapping[str, Any]) -> list[str]:
        """The prompt `body` renders to, in tokens, as the deployment's tokenizer endpoint counts it."""
        if "messages" not in body and isinstance(body.get("prompt"), str):
            return str(body["prompt"]).split()
        faults = self.profile.faults
        request = fault_hooks.on_request(faults, parse_request(body, self.model_id, faults))
        return rendered_prompt(request).split() + ["<|message|>"] * (TOKENS_PER_MESSAGE * len(request.messages))

    def answers_correctly(self, item: FixtureItem, seed: int | None) -> bool:
        # Depends only on (item, seed), so a less accurate profile's correct answers
        # are a subset of a more accurate one's.
        if not item.graded:
            return True
        return _unit_draw(item.id, seed) < self.solve_chance(
            f"{item.suite}/{item.id}", self.profile.accuracy_for(item.suite)
        )

    def solve_chance(self, key: str, accuracy: float) -> float:
        """Item `key`'s own chance of a right answer at this mean accuracy (reference/difficulty.py):
        the one place every graded answer, retrieval and agentic task decides right or wrong."""
        return solve_chance(key, accuracy, self.profile.item_spread)

    def _request_seed(self, body: Mapping[str, Any], request: ChatRequest) -> int:
        keys = ("messages", "tools", "tool_choice", "response_format")
        # A fault profile samples as its base does, so the fault is the only difference between them.
        sampled_as = self.profile.base or self.profile.name
        parts: list[object] = [sampled_as, [body.get(key) for key in keys], request.seed, request.effort]
        # Other effective sampling parameters draw another sample from the same seed, as a
        # real sampler does. The answers under K3's thinking recipe (what the plugin sends
        # by default) keep the digest they always had, so earlier outputs stay identical.
        if request.sampling != K3_THINKING_SAMPLING:
            parts.append(dataclasses.astuple(request.sampling))
        return _digest(*parts)

    def _content(self, request: ChatRequest, correct_item: FixtureItem | None, reply: str) -> str:
        last = request.messages[-1]
        if last["role"] == "tool":
            tool_name = _called_tool_name(request.messages, str(last.get("tool_call_id") or ""))
            return f'The {tool_name} tool returned "{message_text(last)}". {reply}'
        response_format = request.response_format or {}
        if response_format.get("type") == "json_schema":
            schema = response_format["json_schema"]["schema"]
            Draft202012Validator.check_schema(schema)
            fixture_answer = _as_json(correct_item.answer) if correct_item else None
            faults = self.profile.faults
            if fixture_answer is not None and Draft202012Validator(schema).is_valid(fixture_answer):
                return fault_hooks.structured_json(faults, fixture_answer)
            return fault_hooks.structured_json(faults, example_value(schema))
        if response_format.get("type") == "json_object":
            fixture_answer = _as_json(correct_item.answer) if correct_item else None
            value = fixture_answer if isinstance(fixture_answer, dict) else {"answer": reply}
            return fault_hooks.structured_json(self.profile.faults, value)
        return reply


def _as_json(answer: Any) -> Any:
    if isinstance(answer, str):
        try:
            return json.loads(answer)
        except ValueError:
            return None
    return answer


def _prompt_text(request: ChatRequest) -> str:
    return " ".join(message_text(message) for message in request.messages)


def _called_tool_name(messages: Sequence[Mapping[str, Any]], tool_call_id: str) -> str:
    for message in messages:
        for call in message.get("tool_calls") or ():
            if call.get("id") == tool_call_id and isinstance(call.get("function"), dict):
                return str(call["function"].get("name", "requested"))
    return "requested"


def _within_budget(
    request: ChatRequest, reasoning: str, content: str | None, calls: tuple[ToolCall, ...]
) -> SimulatedTurn:
    if content and request.stop:
        content = _before_stop(content, request.stop)
    reasoning_tokens = count_tokens(reasoning)
    answer_tokens = count_tokens(content or "") + sum(count_tokens(call.arguments) for call in calls)
    finish_reason = "tool_calls" if calls else "stop"
    limit = request.max_tokens
    if limit is not None and reasoning_tokens + answer_tokens > limit:
        finish_reason = "length"
        if reasoning_tokens >= limit:
            reasoning, content, calls = take_tokens(reasoning, limit), "", ()
        elif calls:
            calls = _calls_to_the_cut(calls, limit - reasoning_tokens)
        else:
            content = take_tokens(content or "", limit - reasoning_tokens)
        reasoning_tokens = count_tokens(reasoning)
        answer_tokens = min(
            limit - reasoning_tokens, count_tokens(content or "") + sum(count_tokens(c.arguments) for c in calls)
        )
    return SimulatedTurn(
        reasoning=reasoning,
        content=content,
        tool_calls=calls,
        finish_reason=finish_reason,
        prompt_tokens=prompt_tokens(request),
        completion_tokens=reasoning_tokens + answer_tokens,
        reasoning_tokens=reasoning_tokens,
        thinking=request.thinking,
        after_tool_result=request.messages[-1].get("role") == "tool",
    )


def _calls_to_the_cut(calls: tuple[ToolCall, ...], room: int) -> tuple[ToolCall, ...]:
    """The calls written whole within `room` tokens, then the one the budget cut, last (the
    writer leaves it and the tools block unclosed: xtml/writer.py)."""
    kept: list[ToolCall] = []
    for call in calls:
        kept.append(call)
        room -= count_tokens(call.arguments)
        if room < 0:
            break
    return tuple(kept)


def _before_stop(content: str, stop: tuple[str, ...]) -> str:
    """The answer up to the first stop string in it, which the output leaves out (OpenAI's
    `stop`). Matched in the answer only: the simulator's reasoning is not searched, so a
    stop string taken from the answer and absent from the reasoning ends the answer."""
    found = [index for index in (content.find(value) for value in stop) if index >= 0]
    return content[: min(found)] if found else content
