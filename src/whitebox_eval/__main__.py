from whitebox_eval.cli import main

main()
