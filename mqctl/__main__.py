from mqctl.cli import main

main()
