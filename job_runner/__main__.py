print("runner main")
