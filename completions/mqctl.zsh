#compdef mqctl

_mqctl_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _MQCTL_COMPLETE=complete_zsh mqctl)
}

compdef _mqctl_completion mqctl
