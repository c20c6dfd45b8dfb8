print("cloudlet")
