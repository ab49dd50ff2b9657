import AviaryCommands

AviaryCommand.main()
