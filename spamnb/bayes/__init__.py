"""bayes"""
