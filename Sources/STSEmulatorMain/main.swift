print("sts-emulator")
