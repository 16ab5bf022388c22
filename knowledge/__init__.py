"""The experience graph: typed models, the Neo4j store, embeddings, the FAISS index, hybrid retrieval."""
