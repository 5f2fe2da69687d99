"""vLLM 0.33.0's prefix cache: a hash map of blocks per KV cache group over one shared block pool with one
free queue (no radix tree, no de-duplication). ``manager.BlockCacheManager`` is its cache manager, behind the
same interface (``sim/cache/interface.py``) as the radix ``CacheManager``. The rules, each with its vLLM
function: docs/vllm-rules.md."""
