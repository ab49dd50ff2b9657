import AviaryCommands

await AviaryCommand.main()
