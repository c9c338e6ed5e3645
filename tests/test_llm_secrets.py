"""Secrets never reach disk (issue 46 item 5): a token where a variable's name belongs, a key in
base_url's userinfo or query string, are refused at planning by messages that show at most a
known prefix and the length; records never hold a base_url with a query string. (The DAG run
with planted secrets, grepping every file it writes: test_workflow_llm.py.)"""

from __future__ import annotations

import pytest

from crucible.core.errors import ConfigError
from crucible.core.secrets import looks_like_key, masked, scrub
from crucible.dag.config import check_config
from crucible.llm.model_entry import model_spec
from crucible.llm.run_record import public_url

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
SK = "sk-proj-" + "Zq81xWv03Lk2mNn4Pp5Rr6"


def openai_entry(**extra):
    return {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", **extra}


def refusal(config) -> str:
    """The planning check's message (schema, then each family's checks), as Snakemake logs it."""
    with pytest.raises(ConfigError) as err:
        check_config(config)
    return str(err.value)


@pytest.mark.parametrize(
    "value, shown, says",
    [
        (HF, "hf_… (37 characters)", "has the form of a key, not of a variable's name"),
        (SK, "sk-… (30 characters)", "config error at llm.models.m.api_key_env: sk-… (30 characters) does not match"),
        ("my key", "… (6 characters)", "does not match"),
        ("Zq81xWv03Lk2mNn4Pp5Rr6TtYy", "… (26 characters)", "has the form of a key"),
    ],
)
def test_a_key_in_api_key_env_is_refused_at_planning_without_being_echoed(value, shown, says):
    message = refusal({"llm": {"models": {"m": openai_entry(api_key_env=value)}}})
    assert value not in message and (len(value) < 12 or value[4:12] not in message), message
    assert shown in message and says in message, message
    # the job's own check (model_spec, run again in the job) says the same, masked
    with pytest.raises(ConfigError) as err:
        model_spec("m", openai_entry(api_key_env=value))
    assert value not in str(err.value) and shown in str(err.value)
    assert "put the key in an environment variable and give that variable's NAME as api_key_env" in str(err.value)


def test_names_of_variables_pass():
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "CRUCIBLE_DAG_KEY", "MY_VERY_LONG_ENVIRONMENT_NAME_2024", "hf_token"):
        assert model_spec("m", openai_entry(api_key_env=name))["api_key_env"] == name
        assert not looks_like_key(name)


@pytest.mark.parametrize(
    "url, secret, says",
    [
        ("http://127.0.0.1:9/v1?api_key=" + SK, SK, "a query string or fragment in the URL (?…) is refused"),
        ("http://127.0.0.1:9/v1?key=plainword", "plainword", "a query string or fragment in the URL"),
        ("http://127.0.0.1:9/v1#" + HF, HF, "a query string or fragment in the URL"),
        ("http://alice:" + HF + "@127.0.0.1:9/v1", HF, "credentials in the URL (user:password@) are refused"),
        ("http://" + SK + "@127.0.0.1:9/v1", SK, "credentials in the URL (user:password@) are refused"),
    ],
)
def test_userinfo_and_query_strings_in_base_url_are_refused_with_the_fix(url, secret, says):
    message = refusal({"llm": {"models": {"m": openai_entry(base_url=url)}}})
    assert secret not in message and says in message, message
    assert "use http://127.0.0.1:9/v1 and put the key in the variable that api_key_env names" in message


@pytest.mark.parametrize(
    "params, where, shown",
    [
        ({"extra_body": {"api_key": SK}}, "params.extra_body.api_key: a credential (sk-… (30 characters))", SK),
        ({"extra_body": {"Authorization": "Bearer x"}}, "params.extra_body.Authorization: a credential", "Bearer x"),
        ({"extra_body": {"opts": [{"auth": HF}]}}, "params.extra_body.opts[0].auth: hf_… (37 characters)", HF),
        ({"stop": ["\n", SK]}, "params.stop[1]: sk-… (30 characters) has the form of a key", SK),
    ],
)
def test_a_key_in_the_params_is_refused_without_being_echoed(params, where, shown):
    """extra_body is sent as it is: a key there reached the response record, the cache entries and
    the job's log (a run of crucible llm generate against a local server wrote it to all three)."""
    message = refusal({"llm": {"models": {"m": openai_entry(api_key_env="K", params=params)}}})
    assert shown not in message and f"llm.models.m.{where}" in message, message
    assert "put the key in an environment variable and give that variable's NAME as api_key_env" in message
    # a server's own sampling settings pass, numbers and words alike
    body = {"repeat_penalty": 1.0, "top_k": 20, "guided_decoding_backend": "xgrammar", "key_order": None}
    model_spec("m", openai_entry(api_key_env="K", params={"extra_body": body, "stop": ["###", "</answer>"]}))


def test_the_record_never_holds_a_query_string_or_userinfo():
    assert public_url("http://u:p@host:8000/v1?api_key=x#frag") == "http://host:8000/v1"


def test_scrub_masks_keys_and_url_secrets_in_any_message():
    text = f"bad value '{HF}' at http://u:{SK}@h:1/v1?api_key=PLAIN and sk_x, sha {'a' * 64}"
    out = scrub(text)
    assert HF not in out and SK not in out and "PLAIN" not in out
    assert "'hf_… (37 characters)'" in out and "http://***@h:1/v1?***" in out
    assert "sk_x" in out and "a" * 64 in out, "short words and digests are no keys"
    assert masked(HF) == "hf_… (37 characters)" and masked("abc") == "… (3 characters)"
