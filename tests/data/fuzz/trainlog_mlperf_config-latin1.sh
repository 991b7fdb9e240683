export TP=ÿ
