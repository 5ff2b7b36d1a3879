"""Every conformance check fails on a reference deployment that has the fault it claims
to catch, with the layer it names, and the checks unrelated to that fault pass.

Each profile is tp8 plus one real serving bug (see `k3conformance/reference/profiles.py`).
The expected failures per profile are exact: the target check, and the checks that the
same fault legitimately breaks too (an empty `content` also loses the structured output,
for instance). A new failure anywhere else is a regression in a check or a profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from run_files import CONFORMANCE_SUITES, CONTRACT_SUITE, LOAD_SUITE, check_name, copy_suites, outcomes

from k3conformance.checks.contract import LENGTH_ENDINGS, calls_tool, cell_id, design

# profile -> (the check it exists to trip, the layer that check must name)
TARGETS: dict[str, tuple[str, str]] = {
    "arguments-cut-at-marker": ("tool_calls/calls_match_expected[plain]", "parser"),
    "ascii-only-property-grammar": ("tool_calls/arguments_match_schema[plain]", "model"),
    "concurrent-empty-tool-deltas": ("load/calls_match_expected_under_load", "parser"),
    "content-before-reasoning": ("reasoning/stream_reasoning_before_content", "parser"),
    "double-finish": ("reasoning/stream_one_finish_frame", "api"),
    "drops-reasoning-history": ("reasoning/multi_turn_with_reasoning_history[plain]", "api"),
    "duplicate-tool-ids": ("tool_calls/tool_call_ids[plain]", "parser"),
    "dynamic-tools-ignored": ("tool_calls/dynamic_tools_called[plain]", "api"),
    "dynamic-tools-leading-only": ("tool_calls/dynamic_tools_called[plain]", "api"),
    "json-output-indented": ("structured_output/json_schema_output_compact[plain]", "api"),
    "dynamic-tools-unvalidated": ("request_validation/malformed_dynamic_tools_rejected[plain]", "api"),
    "eager-tool-calls": ("tool_calls/irrelevant_prompt_makes_no_call[plain]", "model"),
    "effort-ignored": ("reasoning/effort_orders_reasoning_length[plain]", "api"),
    "effort-precedence-inverted": ("reasoning/effort_field_wins_over_reasoning_effort", "api"),
    "empty-content": ("reasoning/answer_follows_reasoning[plain]", "parser"),
    "empty-tool-calls": ("tool_calls/finish_reason_matches_tool_calls[plain]", "parser"),
    "hallucinated-tool-name": ("tool_calls/arguments_match_schema[plain]", "parser"),
    "k2-think-tags": ("reasoning/no_markup_leaks[plain]", "parser"),
    "length-reported-as-stop": ("reasoning/truncation_reported_as_length[plain]", "api"),
    "lenient-validation": ("request_validation/invalid_request_rejected[plain]", "api"),
    "message-close-leak": ("reasoning/no_markup_leaks[stream]", "parser"),
    "no-done-marker": ("smoke/streaming_matches_non_streaming", "api"),
    "no-reasoning-parser": ("reasoning/reasoning_present[plain]", "parser"),
    "no-stream-usage": ("reasoning/stream_usage_frame", "api"),
    "null-reasoning-stream": ("reasoning/stream_reasoning_not_nulled", "parser"),
    "numeric-strings-coerced": ("tool_calls/arguments_match_schema[plain]", "model"),
    "own-sampling-defaults": ("request_validation/omitted_sampling_parameters_default_to_k3[plain]", "api"),
    "parallel-index-collision": ("tool_calls/parallel_calls[stream]", "parser"),
    "prefix-cache-corruption": ("state_consistency/prefix_reuse_keeps_answers[plain]", "model"),
    "prompt-tokens-exclude-tools": ("prompt_tokens/prompt_tokens_match_tokenizer[plain]", "api"),
    "prompt-tokens-skewed": ("prompt_tokens/prompt_tokens_match_tokenizer[plain]", "api"),
    "raw-stop-token": ("reasoning/answer_follows_reasoning[plain]", "api"),
    "reasoning-effort-dropped": ("reasoning/reasoning_effort_alone_applied", "api"),
    "reasoning-field-vllm": ("reasoning/reasoning_present[plain]", "parser"),
    "rejects-reasoning-history": ("reasoning/multi_turn_with_reasoning_history[plain]", "api"),
    "rejects-tool-choice-without-tools": ("request_validation/tool_choice_without_tools_accepted[plain]", "api"),
    "required-without-tools-accepted": ("request_validation/invalid_request_rejected[plain]", "api"),
    "response-format-ignored": ("structured_output/response_format_json_schema[plain]", "api"),
    "response-format-unvalidated": ("request_validation/malformed_response_format_rejected[plain]", "api"),
    "reused-tool-ids": ("tool_calls/round_trip_uses_tool_result[plain]", "parser"),
    "sampling-params-unlocked": ("request_validation/locked_sampling_parameters_rejected[plain]", "api"),
    "schema-constraints-dropped": ("tool_schemas/tool_call_arguments_match_schema[plain]", "model"),
    "skipped-think-as-reasoning": ("reasoning/answer_follows_reasoning[plain]", "parser"),
    "stream-repeats-tool-name": ("tool_calls/streaming_matches_non_streaming", "parser"),
    "strict-history-ids": ("tool_calls/history_from_other_clients[plain]", "api"),
    "strict-schemas-crash-under-load": ("load/strict_schemas_answered_under_load", "api"),
    "stringified-arguments": ("tool_calls/arguments_match_schema[plain]", "parser"),
    "thinking-disable-ignored": ("reasoning/thinking_disabled[plain]", "api"),
    "think-opener-as-text": ("reasoning/no_markup_leaks[plain]", "parser"),
    "tool-choice-named-ignored": ("tool_calls/tool_choice_named[plain]", "api"),
    "tool-choice-none-ignored": ("tool_calls/tool_choice_none[plain]", "api"),
    "tokens-after-eos": ("smoke/chat_round_trip", "api"),
    "tool-choice-required-ignored": ("tool_calls/tool_choice_required[plain]", "api"),
    "tools-lost-in-unclosed-think": ("tool_calls/finish_reason_matches_tool_calls[plain]", "parser"),
    "tools-lost-in-unclosed-think-streams": ("tool_calls/finish_reason_matches_tool_calls[stream]", "parser"),
    "unparsed-arguments": ("tool_calls/calls_match_expected[plain]", "parser"),
    "usage-excludes-reasoning": ("reasoning/usage_counts_reasoning[plain]", "api"),
    "usage-ignores-reasoning": ("reasoning/usage_counts_reasoning[plain]", "api"),
    "validation-500": ("request_validation/invalid_request_rejected[plain]", "api"),
    "xtml-tools-without-tools": ("tool_calls/no_tool_markup_in_content[plain]", "parser"),
    # The 2026 public bugs the API contract matrix catches (issue 34): they run only its suite.
    "concurrent-empty-content": ("contract/answer_in_content", "parser"),
    "reasoning-parser-off-after-tool-result": ("contract/reasoning_where_thinking_says", "parser"),
    "reasoning-tokens-zero": ("contract/usage_adds_up", "api"),
    "thinking-off-answer-as-reasoning": ("contract/reasoning_where_thinking_says", "parser"),
    "unclosed-tools-section-dropped": ("contract/calls_whole", "parser"),
}

# profile -> every check (suite/check[mode]) that fails on it
EXPECTED_FAILURES: dict[str, set[str]] = {
    "arguments-cut-at-marker": {
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
    },
    "ascii-only-property-grammar": {
        "tool_calls/arguments_match_schema[plain]",
        "tool_calls/arguments_match_schema[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
    },
    # At --k3-concurrency 1 (EXTRA_ARGUMENTS): only the load lane's loaded phase has streams in flight together.
    "concurrent-empty-tool-deltas": {
        "load/calls_match_expected_under_load",
        "load/finish_reason_matches_tool_calls_under_load",
        "load/parallel_calls_under_load",
    },
    "content-before-reasoning": {
        "reasoning/stream_reasoning_before_content",
    },
    "double-finish": {
        "reasoning/stream_one_finish_frame",
        "reasoning/truncation_reported_as_length[stream]",
        "smoke/streaming_matches_non_streaming",
        "tool_calls/finish_reason_matches_tool_calls[stream]",
        "tool_calls/streaming_matches_non_streaming",
    },
    "drops-reasoning-history": {
        "reasoning/keep_all_answer_uses_history_reasoning[plain]",
        "reasoning/keep_all_answer_uses_history_reasoning[stream]",
        "reasoning/keep_all_counts_history_reasoning[plain]",
        "reasoning/keep_all_counts_history_reasoning[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
    },
    "duplicate-tool-ids": {
        "tool_calls/parallel_calls[plain]",
        "tool_calls/parallel_calls[stream]",
        "tool_calls/tool_call_ids[plain]",
        "tool_calls/tool_call_ids[stream]",
    },
    "dynamic-tools-ignored": {
        "request_validation/malformed_dynamic_tools_rejected[plain]",
        "request_validation/malformed_dynamic_tools_rejected[stream]",
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
    },
    "dynamic-tools-leading-only": {
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
    },
    "json-output-indented": {
        "structured_output/json_schema_output_compact[plain]",
        "structured_output/json_schema_output_compact[stream]",
    },
    "dynamic-tools-unvalidated": {
        "request_validation/malformed_dynamic_tools_rejected[plain]",
        "request_validation/malformed_dynamic_tools_rejected[stream]",
    },
    "eager-tool-calls": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/history_from_other_clients[plain]",
        "tool_calls/history_from_other_clients[stream]",
        "tool_calls/irrelevant_prompt_makes_no_call[plain]",
        "tool_calls/irrelevant_prompt_makes_no_call[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "effort-ignored": {
        "reasoning/effort_field_wins_over_reasoning_effort",
        "reasoning/effort_omitted_means_max",
        "reasoning/effort_orders_reasoning_length[plain]",
        "reasoning/effort_orders_reasoning_length[stream]",
        "reasoning/effort_parameter_applied",
        "reasoning/reasoning_effort_alone_applied",
    },
    "effort-precedence-inverted": {
        "reasoning/effort_field_wins_over_reasoning_effort",
    },
    "empty-content": {
        "reasoning/answer_follows_reasoning[plain]",
        "reasoning/answer_follows_reasoning[stream]",
        "reasoning/keep_all_answer_uses_history_reasoning[plain]",
        "reasoning/keep_all_answer_uses_history_reasoning[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
        "request_validation/tool_choice_without_tools_accepted[plain]",
        "request_validation/tool_choice_without_tools_accepted[stream]",
        "smoke/chat_round_trip",
        "smoke/streaming_matches_non_streaming",
        "state_consistency/continued_history_keeps_answers[plain]",
        "state_consistency/continued_history_keeps_answers[stream]",
        "state_consistency/prefix_reuse_keeps_answers[plain]",
        "state_consistency/prefix_reuse_keeps_answers[stream]",
        "structured_output/response_format_json_object[plain]",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[plain]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[plain]",
        "structured_output/response_format_json_schema_non_strict[stream]",
        "structured_output/response_format_text[plain]",
        "structured_output/response_format_text[stream]",
        "tool_calls/history_from_other_clients[plain]",
        "tool_calls/history_from_other_clients[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "empty-tool-calls": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_calls/finish_reason_matches_tool_calls[plain]",
        "tool_calls/finish_reason_matches_tool_calls[stream]",
        "tool_calls/no_tool_markup_in_content[plain]",
        "tool_calls/no_tool_markup_in_content[stream]",
        "tool_calls/parallel_calls[plain]",
        "tool_calls/parallel_calls[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
        "tool_calls/tool_choice_named[plain]",
        "tool_calls/tool_choice_named[stream]",
        "tool_calls/tool_choice_required[plain]",
        "tool_calls/tool_choice_required[stream]",
        "tool_schemas/tool_call_arguments_match_schema[plain]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "hallucinated-tool-name": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/arguments_match_schema[plain]",
        "tool_calls/arguments_match_schema[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_calls/tool_choice_named[plain]",
        "tool_calls/tool_choice_named[stream]",
        "tool_schemas/tool_call_arguments_match_schema[plain]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "k2-think-tags": {
        "reasoning/no_markup_leaks[plain]",
        "reasoning/no_markup_leaks[stream]",
    },
    "length-reported-as-stop": {
        "reasoning/truncation_reported_as_length[plain]",
        "reasoning/truncation_reported_as_length[stream]",
    },
    "lenient-validation": {
        "request_validation/invalid_request_rejected[plain]",
        "request_validation/invalid_request_rejected[stream]",
        "request_validation/malformed_dynamic_tools_rejected[plain]",
        "request_validation/malformed_dynamic_tools_rejected[stream]",
    },
    "message-close-leak": {
        "reasoning/no_markup_leaks[stream]",
        "smoke/streaming_matches_non_streaming",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[stream]",
        "tool_calls/no_tool_markup_in_content[stream]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "no-done-marker": {
        "smoke/streaming_matches_non_streaming",
    },
    "no-reasoning-parser": {
        "reasoning/effort_field_wins_over_reasoning_effort",
        "reasoning/effort_omitted_means_max",
        "reasoning/effort_orders_reasoning_length[plain]",
        "reasoning/effort_orders_reasoning_length[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
        "reasoning/effort_parameter_applied",
        "reasoning/no_markup_leaks[plain]",
        "reasoning/no_markup_leaks[stream]",
        "reasoning/reasoning_effort_alone_applied",
        "reasoning/reasoning_present[plain]",
        "reasoning/reasoning_present[stream]",
        "smoke/chat_round_trip",
        "smoke/streaming_matches_non_streaming",
        "structured_output/response_format_json_object[plain]",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[plain]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[plain]",
        "structured_output/response_format_json_schema_non_strict[stream]",
        "tool_calls/no_tool_markup_in_content[plain]",
        "tool_calls/no_tool_markup_in_content[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "no-stream-usage": {
        "prompt_tokens/prompt_tokens_match_tokenizer[stream]",
        "reasoning/keep_all_counts_history_reasoning[stream]",
        "reasoning/stream_usage_frame",
        "reasoning/usage_counts_reasoning[stream]",
        "smoke/usage_reported",
    },
    "null-reasoning-stream": {
        "reasoning/effort_orders_reasoning_length[stream]",
        "reasoning/reasoning_present[stream]",
        "reasoning/stream_reasoning_not_nulled",
        "smoke/streaming_matches_non_streaming",
    },
    "numeric-strings-coerced": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/arguments_match_schema[plain]",
        "tool_calls/arguments_match_schema[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
    },
    "own-sampling-defaults": {
        "request_validation/omitted_sampling_parameters_default_to_k3[plain]",
        "request_validation/omitted_sampling_parameters_default_to_k3[stream]",
    },
    "parallel-index-collision": {
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/arguments_match_schema[stream]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/parallel_calls[stream]",
        "tool_calls/streaming_matches_non_streaming",
    },
    "prefix-cache-corruption": {
        "state_consistency/continued_history_keeps_answers[plain]",
        "state_consistency/continued_history_keeps_answers[stream]",
        "state_consistency/prefix_reuse_keeps_answers[plain]",
        "state_consistency/prefix_reuse_keeps_answers[stream]",
    },
    "prompt-tokens-exclude-tools": {
        "prompt_tokens/prompt_tokens_match_tokenizer[plain]",
        "prompt_tokens/prompt_tokens_match_tokenizer[stream]",
    },
    "prompt-tokens-skewed": {
        "prompt_tokens/prompt_tokens_match_tokenizer[plain]",
        "prompt_tokens/prompt_tokens_match_tokenizer[stream]",
    },
    "raw-stop-token": {
        "reasoning/answer_follows_reasoning[plain]",
        "reasoning/answer_follows_reasoning[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
        "request_validation/tool_choice_without_tools_accepted[plain]",
        "request_validation/tool_choice_without_tools_accepted[stream]",
        "smoke/chat_round_trip",
        "smoke/streaming_matches_non_streaming",
        "structured_output/response_format_json_object[plain]",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[plain]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[plain]",
        "structured_output/response_format_json_schema_non_strict[stream]",
        "structured_output/response_format_text[plain]",
        "structured_output/response_format_text[stream]",
    },
    "reasoning-effort-dropped": {
        "reasoning/reasoning_effort_alone_applied",
    },
    "reasoning-field-vllm": {
        "reasoning/reasoning_present[plain]",
        "reasoning/reasoning_present[stream]",
    },
    "rejects-reasoning-history": {
        "prompt_tokens/prompt_tokens_match_tokenizer[plain]",
        "prompt_tokens/prompt_tokens_match_tokenizer[stream]",
        "reasoning/keep_all_answer_uses_history_reasoning[plain]",
        "reasoning/keep_all_answer_uses_history_reasoning[stream]",
        "reasoning/keep_all_counts_history_reasoning[plain]",
        "reasoning/keep_all_counts_history_reasoning[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
        "state_consistency/continued_history_keeps_answers[plain]",
        "state_consistency/continued_history_keeps_answers[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "rejects-tool-choice-without-tools": {
        "request_validation/tool_choice_without_tools_accepted[plain]",
        "request_validation/tool_choice_without_tools_accepted[stream]",
    },
    "required-without-tools-accepted": {
        "request_validation/invalid_request_rejected[plain]",
        "request_validation/invalid_request_rejected[stream]",
    },
    "response-format-ignored": {
        "structured_output/response_format_json_object[plain]",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[plain]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[plain]",
        "structured_output/response_format_json_schema_non_strict[stream]",
    },
    "response-format-unvalidated": {
        "request_validation/malformed_response_format_rejected[plain]",
        "request_validation/malformed_response_format_rejected[stream]",
    },
    "reused-tool-ids": {
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "sampling-params-unlocked": {
        "request_validation/locked_sampling_parameters_rejected[plain]",
        "request_validation/locked_sampling_parameters_rejected[stream]",
    },
    "schema-constraints-dropped": {
        "tool_schemas/tool_call_arguments_match_schema[plain]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "skipped-think-as-reasoning": {
        "reasoning/answer_follows_reasoning[plain]",
        "reasoning/answer_follows_reasoning[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "stream-repeats-tool-name": {
        "tool_calls/streaming_matches_non_streaming",
    },
    "strict-history-ids": {
        "prompt_tokens/prompt_tokens_match_tokenizer[plain]",
        "prompt_tokens/prompt_tokens_match_tokenizer[stream]",
        "tool_calls/history_from_other_clients[plain]",
        "tool_calls/history_from_other_clients[stream]",
    },
    # The lane runs after every other test, so the crash it causes costs no other check its evidence.
    "strict-schemas-crash-under-load": {
        "load/strict_schemas_answered_under_load",
    },
    "stringified-arguments": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/arguments_match_schema[plain]",
        "tool_calls/arguments_match_schema[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_schemas/tool_call_arguments_match_schema[plain]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "thinking-disable-ignored": {
        "reasoning/thinking_disabled[plain]",
        "reasoning/thinking_disabled[stream]",
    },
    "think-opener-as-text": {
        "reasoning/effort_field_wins_over_reasoning_effort",
        "reasoning/effort_omitted_means_max",
        "reasoning/effort_orders_reasoning_length[plain]",
        "reasoning/effort_orders_reasoning_length[stream]",
        "reasoning/effort_parameter_applied",
        "reasoning/keep_all_answer_uses_history_reasoning[plain]",
        "reasoning/keep_all_answer_uses_history_reasoning[stream]",
        "reasoning/multi_turn_with_reasoning_history[plain]",
        "reasoning/multi_turn_with_reasoning_history[stream]",
        "reasoning/no_markup_leaks[plain]",
        "reasoning/no_markup_leaks[stream]",
        "reasoning/reasoning_effort_alone_applied",
        "reasoning/reasoning_present[plain]",
        "reasoning/reasoning_present[stream]",
        "smoke/chat_round_trip",
        "smoke/streaming_matches_non_streaming",
        "state_consistency/continued_history_keeps_answers[plain]",
        "state_consistency/continued_history_keeps_answers[stream]",
        "state_consistency/prefix_reuse_keeps_answers[plain]",
        "state_consistency/prefix_reuse_keeps_answers[stream]",
        "structured_output/response_format_json_object[plain]",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[plain]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[plain]",
        "structured_output/response_format_json_schema_non_strict[stream]",
        "tool_calls/history_from_other_clients[plain]",
        "tool_calls/history_from_other_clients[stream]",
        "tool_calls/no_tool_markup_in_content[plain]",
        "tool_calls/no_tool_markup_in_content[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
    },
    "tool-choice-named-ignored": {
        "request_validation/invalid_request_rejected[plain]",
        "request_validation/invalid_request_rejected[stream]",
        "tool_calls/tool_choice_named[plain]",
        "tool_calls/tool_choice_named[stream]",
    },
    "tool-choice-none-ignored": {
        "tool_calls/tool_choice_none[plain]",
        "tool_calls/tool_choice_none[stream]",
    },
    "tokens-after-eos": {
        "smoke/chat_round_trip",
        "smoke/streaming_matches_non_streaming",
        "structured_output/response_format_json_object[plain]",
        "structured_output/response_format_json_object[stream]",
        "structured_output/response_format_json_schema[plain]",
        "structured_output/response_format_json_schema[stream]",
        "structured_output/response_format_json_schema_non_strict[plain]",
        "structured_output/response_format_json_schema_non_strict[stream]",
    },
    "tool-choice-required-ignored": {
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
        "tool_calls/tool_choice_required[plain]",
        "tool_calls/tool_choice_required[stream]",
    },
    "tools-lost-in-unclosed-think": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_calls/finish_reason_matches_tool_calls[plain]",
        "tool_calls/finish_reason_matches_tool_calls[stream]",
        "tool_calls/parallel_calls[plain]",
        "tool_calls/parallel_calls[stream]",
        "tool_calls/round_trip_uses_tool_result[plain]",
        "tool_calls/round_trip_uses_tool_result[stream]",
        "tool_calls/tool_choice_named[plain]",
        "tool_calls/tool_choice_named[stream]",
        "tool_calls/tool_choice_required[plain]",
        "tool_calls/tool_choice_required[stream]",
        "tool_schemas/tool_call_arguments_match_schema[plain]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "tools-lost-in-unclosed-think-streams": {
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_calls/finish_reason_matches_tool_calls[stream]",
        "tool_calls/parallel_calls[stream]",
        "tool_calls/round_trip_uses_tool_result[stream]",
        "tool_calls/streaming_matches_non_streaming",
        "tool_calls/tool_choice_named[stream]",
        "tool_calls/tool_choice_required[stream]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "unparsed-arguments": {
        "bfcl/calls_match_ground_truth[plain]",
        "bfcl/calls_match_ground_truth[stream]",
        "tool_calls/arguments_match_schema[plain]",
        "tool_calls/arguments_match_schema[stream]",
        "tool_calls/calls_match_expected[plain]",
        "tool_calls/calls_match_expected[stream]",
        "tool_calls/dynamic_tools_called[plain]",
        "tool_calls/dynamic_tools_called[stream]",
        "tool_schemas/tool_call_arguments_match_schema[plain]",
        "tool_schemas/tool_call_arguments_match_schema[stream]",
    },
    "usage-excludes-reasoning": {
        "reasoning/usage_counts_reasoning[plain]",
        "reasoning/usage_counts_reasoning[stream]",
    },
    "usage-ignores-reasoning": {
        "reasoning/usage_counts_reasoning[plain]",
        "reasoning/usage_counts_reasoning[stream]",
    },
    "validation-500": {
        "request_validation/invalid_request_rejected[plain]",
        "request_validation/invalid_request_rejected[stream]",
        "request_validation/malformed_dynamic_tools_rejected[plain]",
        "request_validation/malformed_dynamic_tools_rejected[stream]",
    },
    "xtml-tools-without-tools": {
        "tool_calls/no_tool_markup_in_content[plain]",
        "tool_calls/no_tool_markup_in_content[stream]",
    },
}
Cell = Mapping[str, str]


def keeps_a_whole_call(cell: Cell) -> bool:
    """A length-tool-args cell whose budget runs out in the second of two calls, so that the
    first comes back whole (a named choice calls once: its cut leaves none)."""
    return cell["ending"] == "length-tool-args" and cell["tools"] != "named"


# The API contract matrix (suites/test_contract.py): profile -> clause -> the cells where it fails,
# as a rule over the cell's settings. The profile fails exactly those (clause, cell) pairs of the
# design and no other. The first four are the 2026 public bugs that run only the contract suite;
# the others are earlier profiles shown failing the clauses no new one does.
CONTRACT_FAILURES: dict[str, dict[str, Callable[[Cell], bool]]] = {
    # SGLang 23341: streams emptied once 6 are in flight: streamed answers under load only.
    "concurrent-empty-content": {
        "answer_in_content": lambda cell: (
            cell["stream"] == "on"
            and cell["load"] == "many"
            and not calls_tool(cell)
            and cell["ending"] != "length-reasoning"
        ),
    },
    # Dynamo 10533: a turn after a tool result is read without the reasoning parser.
    "reasoning-parser-off-after-tool-result": {
        "reasoning_where_thinking_says": lambda cell: (
            cell["history"] == "after-tool-result" and cell["thinking"] != "off"
        ),
        "no_markup_in_fields": lambda cell: cell["history"] == "after-tool-result" and cell["thinking"] != "off",
        # No reasoning field to size the budget with: it runs out before the first call is whole.
        "calls_whole": lambda cell: (
            cell["history"] == "after-tool-result" and cell["thinking"] != "off" and keeps_a_whole_call(cell)
        ),
        # The stop word is taken from a content that holds the leaked reasoning; the model's
        # answer does not have it, so the answer runs on past it.
        "answer_in_content": lambda cell: (
            cell["history"] == "after-tool-result" and cell["thinking"] != "off" and cell["ending"] == "stop-sequence"
        ),
    },
    # vLLM 44398 / SGLang 15562: wherever there is reasoning to count.
    "reasoning-tokens-zero": {"usage_adds_up": lambda cell: cell["thinking"] != "off"},
    # ik_llama.cpp 1685 / vllm-ascend 9361: thinking off, the answer read as reasoning.
    "thinking-off-answer-as-reasoning": {
        "reasoning_where_thinking_says": lambda cell: cell["thinking"] == "off" and not calls_tool(cell),
        "answer_in_content": lambda cell: cell["thinking"] == "off" and not calls_tool(cell),
    },
    # Dynamo PR 8208: where the budget ran out in the second of two calls (named cells call once).
    "unclosed-tools-section-dropped": {
        "calls_whole": keeps_a_whole_call,
    },
    # MoonshotAI Kimi-K2 26: every turn that calls a tool: tool_calls [], finish tool_calls, markup in content.
    "empty-tool-calls": {
        "tool_calls_match_finish": lambda cell: calls_tool(cell) and cell["ending"] != "length-reasoning",
        "no_markup_in_fields": lambda cell: calls_tool(cell) and cell["ending"] != "length-reasoning",
        # Where the call's markup left in content is longer than the simulator's token count for
        # the call can hold (one token a word): without reasoning, or beside low effort's short one.
        "usage_adds_up": lambda cell: (
            calls_tool(cell)
            and (
                cell["thinking"] == "off"
                or cell_id(cell).endswith(
                    "thinking=low,tools=auto,ending=length-tool-args,history=after-reasoning,load=alone"
                )
            )
        ),
    },
    "length-reported-as-stop": {
        "finish_reason_as_ended": lambda cell: cell["ending"] in LENGTH_ENDINGS,
        # The whole call kept before the cut comes with `stop`.
        "tool_calls_match_finish": keeps_a_whole_call,
    },
    "no-done-marker": {"stream_framed": lambda cell: cell["stream"] == "on"},
    "unparsed-arguments": {
        "calls_whole": lambda cell: (calls_tool(cell) and cell["ending"] == "stop") or keeps_a_whole_call(cell)
    },
}
# Profiles that run only the contract suite: their failing checks are the clauses above.
CONTRACT_ONLY = frozenset(
    {
        "concurrent-empty-content",
        "reasoning-parser-off-after-tool-result",
        "reasoning-tokens-zero",
        "thinking-off-answer-as-reasoning",
    }
)
for _profile, _clauses in CONTRACT_FAILURES.items():
    EXPECTED_FAILURES.setdefault(_profile, set()).update(f"contract/{clause}" for clause in _clauses)


def contract_failures(profile: str) -> set[tuple[str, str]]:
    """(clause, cell) for every cell of the design where `profile` must fail the clause."""
    return {
        (clause, cell_id(cell))
        for clause, where in CONTRACT_FAILURES.get(profile, {}).items()
        for cell in design()
        if where(cell)
    }


# Checks besides the target whose layer matters: a leak of the reasoning parser must be
# blamed on the parser wherever it breaks something, not on the API or the model.
ALSO_BLAMED: dict[str, dict[str, str]] = {
    "no-reasoning-parser": {
        "smoke/chat_round_trip": "parser",
        "structured_output/response_format_json_schema[plain]": "parser",
        "structured_output/response_format_json_schema[stream]": "parser",
    },
    "message-close-leak": {"smoke/streaming_matches_non_streaming": "parser"},
    "unparsed-arguments": {"tool_calls/calls_match_expected[stream]": "parser"},
    "think-opener-as-text": {"smoke/chat_round_trip": "parser", "reasoning/reasoning_present[stream]": "parser"},
}
# Profiles whose fault only strict mode or vendor mode treats as one; tp8 runs in vendor
# mode so that the vendor checks are shown to pass on it too.
EXTRA_ARGUMENTS = {
    "reasoning-field-vllm": ["--k3-strict-reasoning-field"],
    "sampling-params-unlocked": ["--k3-vendor"],
    "own-sampling-defaults": ["--k3-vendor"],
    "json-output-indented": ["--k3-vendor"],
    # The fault needs 6 streams in flight: the suites at concurrency 1 never have them, the load lane does.
    "concurrent-empty-tool-deltas": ["--k3-concurrency", "1"],
    # The same for SGLang 23341: only the contract matrix's cells under load put 6 streams in flight.
    "concurrent-empty-content": ["--k3-concurrency", "1"],
    "tp8": ["--k3-vendor"],
}


@pytest.fixture
def suites_project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_suites(pytester.path, (*CONFORMANCE_SUITES, LOAD_SUITE, CONTRACT_SUITE))
    return pytester


def suites_of(profile: str) -> tuple[str, ...]:
    """The suite files a profile's run sends: the contract-only profiles need only the contract
    suite, the profiles the contract is shown to catch need it besides the others, and the healthy
    profile runs everything; the rest leave it out, which keeps the matrix's added time small."""
    if profile in CONTRACT_ONLY:
        return (CONTRACT_SUITE,)
    extra = (CONTRACT_SUITE,) if profile in CONTRACT_FAILURES or profile == "tp8" else ()
    return (*CONFORMANCE_SUITES, LOAD_SUITE, *extra)


# Each suite's first items, keeping at least one of every kind each check uses (`--k3-limit`): every
# check runs against every profile at about a third of the cost of all items (the main job runs
# them all). The profiles below trip their checks only on items past the first three of a kind
# (a particular invalid request, prompt-token case, history or BFCL category; for arguments-cut-at-marker,
# the one string argument that holds a closing marker, edge-markup-in-string, which the limit stopped
# choosing once the non-ASCII item joined the edge items), so they run every item, and so does the
# healthy profile, whose run lists every check there is.
LIMIT = ("--k3-limit", "3")
NEEDS_EVERY_ITEM = frozenset(
    {
        "tp8",
        "arguments-cut-at-marker",
        "ascii-only-property-grammar",
        "lenient-validation",
        "numeric-strings-coerced",
        "rejects-reasoning-history",
        "required-without-tools-accepted",
        "sampling-params-unlocked",
        "skipped-think-as-reasoning",
        "strict-history-ids",
        "validation-500",
    }
)


def run_suites(project: pytest.Pytester, profile: str) -> list[dict[str, object]]:
    project.runpytest_subprocess(
        *suites_of(profile),
        *(() if profile in NEEDS_EVERY_ITEM else LIMIT),
        "--k3-endpoint",
        f"reference:{profile}",
        "--k3-results-dir",
        "out",
        "--k3-backoff",
        "0",
        "--k3-retries",
        "0",
        "-p",
        "no:cacheprovider",
        "-q",
        *EXTRA_ARGUMENTS.get(profile, []),
    )
    return outcomes(project.path / "out")


def test_every_fault_profile_is_covered() -> None:
    from k3conformance.reference.profiles import profiles_of_kind

    assert set(TARGETS) == set(EXPECTED_FAILURES) == set(profiles_of_kind("conformance"))
    for profile, (check, _) in TARGETS.items():
        assert check in EXPECTED_FAILURES[profile], profile


def test_every_check_is_proven_by_some_profile(suites_project: pytest.Pytester) -> None:
    records = run_suites(suites_project, "tp8")
    checks = {check_name(outcome) for outcome in records}
    assert all(outcome["outcome"] == "passed" for outcome in records), "the healthy profile must pass everything"
    proven = set().union(*EXPECTED_FAILURES.values())
    assert checks - proven == set(), "these checks fail on no fault profile: they are not shown to catch anything"


@pytest.mark.parametrize("profile", sorted(TARGETS))
def test_fault_profile_fails_its_checks_and_only_those(suites_project: pytest.Pytester, profile: str) -> None:
    records = run_suites(suites_project, profile)
    assert records, "the suites did not run"
    not_scored = {check_name(outcome) for outcome in records if outcome["outcome"] not in ("passed", "failed")}
    assert not_scored == set(), "a fault must show as a failed check, not an error"
    failing = {check_name(outcome) for outcome in records if outcome["outcome"] == "failed"}
    assert failing == EXPECTED_FAILURES[profile]
    target, layer = TARGETS[profile]
    layers = {
        outcome["layer"] for outcome in records if outcome["outcome"] == "failed" and check_name(outcome) == target
    }
    assert layers == {layer}
    for check, blamed in ALSO_BLAMED.get(profile, {}).items():
        assert {o["layer"] for o in records if o["outcome"] == "failed" and check_name(o) == check} == {blamed}, check
    message = next(str(o["message"]) for o in records if o["outcome"] == "failed" and check_name(o) == target)
    assert message.startswith(f"[layer: {layer}] expected ") and "; got: " in message
    if profile in CONTRACT_FAILURES:
        # The contract matrix catches the profile at its cells and nowhere else, naming the cell.
        cells = {
            (check_name(o).removeprefix("contract/"), str(o["item"]))
            for o in records
            if o["outcome"] == "failed" and o["suite"] == "contract"
        }
        assert cells == contract_failures(profile)
        assert all(
            f"at cell {o['item']}" in str(o["message"])
            for o in records
            if o["outcome"] == "failed" and o["suite"] == "contract"
        )
