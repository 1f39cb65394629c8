"""Model families: whether a judge is of the same family as the model under test.

A judge tends to prefer replies of its own family (self-preference), so a judge of the model under test's
family is flagged — a warning in the console and the eval log, an event in the sample's transcript, the
judges named in the panel records (``same_family``), and a line in ``bedside report``. It is not refused:
the user may have no other judge.

The family of a model is read from its Inspect name (``provider/[organisation/...]name``) by one rule:

1. bedside's offline models (``bedside/scripted``, ``bedside/replay``) are not language models: no family;
2. the model's own name (the last ``/`` part, lower case) starting with a prefix of :data:`NAME_PREFIXES`
   gives that family (``openai/gpt-5.5`` -> openai, ``vllm/Qwen/Qwen3-8B`` -> qwen,
   ``openai-api/together/meta-llama/Llama-3.3-70B`` -> meta, ``bedrock/anthropic.claude-...`` -> anthropic;
   a distilled model is its own name's family: ``DeepSeek-R1-Distill-Llama-70B`` -> deepseek);
3. otherwise a provider that serves one maker's models (:data:`PROVIDER_FAMILIES`) gives that maker;
4. otherwise the family is unknown (``None``), and a judge of unknown family is never flagged.

Two models are of the same family when both families are known and equal.
"""

from __future__ import annotations

#: model-name prefixes -> family, the first match wins (so a longer prefix comes before a shorter one)
NAME_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("davinci", "openai"),
    ("openai", "openai"),
    ("claude", "anthropic"),
    ("anthropic", "anthropic"),
    ("gemini", "google"),
    ("gemma", "google"),
    ("medgemma", "google"),
    ("palm", "google"),
    ("google", "google"),
    ("meta-llama", "meta"),
    ("llama", "meta"),
    ("codellama", "meta"),
    ("meta", "meta"),
    ("qwen", "qwen"),
    ("qwq", "qwen"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("ministral", "mistral"),
    ("magistral", "mistral"),
    ("codestral", "mistral"),
    ("devstral", "mistral"),
    ("deepseek", "deepseek"),
    ("grok", "xai"),
    ("phi", "microsoft"),
    ("command", "cohere"),
    ("c4ai", "cohere"),
    ("aya", "cohere"),
    ("cohere", "cohere"),
    ("olmo", "allenai"),
    ("glm", "zhipu"),
    ("kimi", "moonshot"),
    ("nemotron", "nvidia"),
    ("smollm", "huggingface"),
    ("nova", "amazon"),
    ("amazon", "amazon"),
)
#: providers that serve one maker's models -> that maker
PROVIDER_FAMILIES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "vertex": "google",
    "mistral": "mistral",
    "grok": "xai",
}
#: bedside's offline models, which are not language models
NO_FAMILY = ("bedside/scripted", "bedside/replay")


def family(model: str) -> str | None:
    """The family of the model named ``model`` (Inspect's ``provider/name``), by the rule of the module
    docstring; ``None`` when unknown."""
    name = str(model).strip()
    if name.startswith(NO_FAMILY):
        return None
    provider, _, rest = name.partition("/")
    own = (rest or provider).rsplit("/", 1)[-1].lower()
    for prefix, maker in NAME_PREFIXES:
        if own.startswith(prefix):
            return maker
    return PROVIDER_FAMILIES.get(provider.lower())


def same_family(judge: str, subject: str) -> bool:
    """Whether ``judge`` is of the same (known) family as ``subject``."""
    mine = family(judge)
    return mine is not None and mine == family(subject)
