"""The persistent-BrokerId upgrade (RocketMQ 5.0.0/5.1.0 -> 5.1.1+) as guarded steps.

Pure logic lives here (runbook, checks, alignment, clear/backup/restore with a manifest of
sha256 hashes); `mqctl/cli/upgrade_cmd.py` only parses and renders. docs/upgrade.md is the
operator's page.
"""
