"""Every state change of the domain is a function here: `<entity>_<action>(*, ...)`, one transaction,
one Event (docs/conventions.md)."""
