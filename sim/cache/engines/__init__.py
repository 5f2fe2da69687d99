"""The radix engines' rules, one module (or a few) per engine: every question the cache manager asks
(``base.EngineRules``) answered as SGLang (``sglang*``), FreeToken (``freetoken*``), Marconi (``marconi*``) or
no cache (``nocache``) answers it. Each engine's registry entry (``sim/engines/``) names its rules class.
"""
