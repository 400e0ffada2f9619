from omnidub.cli import main

main()
