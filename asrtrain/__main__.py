from asrtrain.cli import main

main()
