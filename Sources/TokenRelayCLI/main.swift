print("token-relay")
