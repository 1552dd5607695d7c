"""Conduct's tool-use checks: rules that read a tool-calling conversation against itself, with no answer key.

Each is a generic rule a pack clause names; the domain (which tools read and write, identifier shapes, amounts
the policy sets, each write's preconditions) comes from the pack's `tools` section (`knowledge_packs.tools`):

- `preconditions`: a write's preconditions held in the state earlier tool outputs showed; a refusal or hand-off
  of a request for a write whose preconditions held is a wrong refusal;
- `grounding`: amounts and attributes the agent states came from a tool output (or the policy's constants); a
  write's arguments were seen before (in a tool output or the user's words), not invented;
- `followthrough`: the agent looked before it refused or deflected a request about the user's own records; what
  the user agreed to was done, with the arguments agreed.

`state` is what they share: the conversation as a timeline of messages and calls, parsed once. `rules` is the
entry point (`agent_factory.rules`: `conduct_tooluse`) that registers them.
"""
