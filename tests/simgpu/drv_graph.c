/*
 * drv_graph.c - Graph Management of CUDA's Driver API. A graph is a list of
 * operations, built by hand or by stream capture (drv_stream.c); an executable
 * graph holds copies of them and runs as one operation of a stream (drv_exec.c).
 *
 *   1. graphs and their nodes
 *   2. executable graphs: instantiation, launch
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- 1. graphs and their nodes */

void sim_graph_free(struct CUgraph_st *g)
{
	for (struct sim_op *op = g->head, *n; op; op = n) {
		n = op->next;
		sim_op_free(op);
	}
	free(g);
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	struct CUgraph_st *g;

	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = g;
	return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	sim_graph_free(hGraph);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	size_t i = 0;

	if (!hGraph || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes)
		for (struct sim_op *op = hGraph->head; op && i < *numNodes; op = op->next)
			nodes[i++] = (CUgraphNode)op;
	else
		i = hGraph->n;
	*numNodes = i;
	return CUDA_SUCCESS;
}

/* Manually built graphs run their nodes in the order they were added, which is
 * always a valid order since a node's dependencies must exist before it. op is
 * NULL when it could not be allocated. */
static CUresult graph_add(CUgraph g, struct sim_op *op, CUgraphNode *node)
{
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	sim_graph_append(g, op);
	*node = (CUgraphNode)op;
	return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				 size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *p)
{
	struct sim_op *op;
	int fail;

	if (!phGraphNode || !hGraph || !p || !p->func)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_KERNEL);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.kern.fn = (void (*)(void **))(void *)p->func;
	op->u.kern.args = sim_pack_args(p->func, p->kernelParams, p->extra, &op->u.kern.store_size, &fail);
	if (fail) {
		free(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return graph_add(hGraph, op, phGraphNode);
}

CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			     size_t numDependencies)
{
	if (!phGraphNode || !hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	return graph_add(hGraph, sim_op_new(OP_NOP), phGraphNode);
}

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			    size_t numDependencies, const CUDA_HOST_NODE_PARAMS *p)
{
	struct sim_op *op;

	if (!phGraphNode || !hGraph || !p || !p->fn)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_HOST);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.host.fn = p->fn;
	op->u.host.ud = p->userData;
	return graph_add(hGraph, op, phGraphNode);
}

/* Graph nodes built by hand: copies and memsets become the same operations a
 * stream would run (host-synchronous behaviour does not apply inside a graph). */
CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_MEMCPY3D *c, CUcontext ctx)
{
	struct sim_span d, s_;
	struct sim_op *op;
	int hs;
	CUresult r;

	if (!phGraphNode || !hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_spans3d(c, &d, &s_)) ||
	    (r = sim_copy_op(d, s_, c->WidthInBytes, c->Height, c->Depth, 0, 0, &op, &hs)))
		return r;
	return graph_add(hGraph, op ? op : sim_op_new(OP_NOP), phGraphNode);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
			      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
	struct sim_op *op;

	if (!phGraphNode || !hGraph || !p || !p->dst || !p->width || !p->height ||
	    (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_MEMSET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->u.set.dst = SIM_PTR(p->dst);
	op->u.set.pitch = p->pitch;
	op->u.set.width = p->width;
	op->u.set.height = p->height;
	op->u.set.elem = p->elementSize;
	op->u.set.value = p->value;
	return graph_add(hGraph, op, phGraphNode);
}

/* ---------------------------------------------------------------- 2. executable graphs */

/* A deep copy of a graph's node, so an executable graph outlives its graph. */
static struct sim_op *op_clone(const struct sim_op *src)
{
	struct sim_op *op = malloc(sizeof(*op));

	if (!op)
		return NULL;
	*op = *src;
	op->next = NULL;
	op->deps = NULL;
	op->ndeps = 0;
	if (src->type == OP_KERNEL && src->u.kern.args) {
		char *dst = malloc(src->u.kern.store_size);
		ptrdiff_t delta;
		if (!dst) {
			free(op);
			return NULL;
		}
		memcpy(dst, src->u.kern.args, src->u.kern.store_size);
		delta = dst - (char *)src->u.kern.args;
		op->u.kern.args = (void **)dst;
		for (size_t i = 0; op->u.kern.args[i]; i++)
			op->u.kern.args[i] = (char *)op->u.kern.args[i] + delta;
	}
	return op;
}

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph g)
{
	struct CUgraphExec_st *e;
	size_t i = 0;

	if (!phGraphExec || !g)
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->nodes = calloc(g->n ? g->n : 1, sizeof(*e->nodes));
	e->refs = 1;
	if (!e->nodes)
		goto oom;
	for (struct sim_op *op = g->head; op; op = op->next, i++)
		if (!(e->nodes[i] = op_clone(op)))
			goto oom;
	e->n = g->n;
	*phGraphExec = e;
	return CUDA_SUCCESS;
oom:
	e->n = i;
	pthread_mutex_lock(&sim_lock);
	sim_exec_put_locked(e);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void sim_exec_put_locked(struct CUgraphExec_st *e)
{
	if (--e->refs)
		return;
	for (size_t i = 0; i < e->n; i++)
		sim_op_free(e->nodes[i]);
	free(e->nodes);
	free(e);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			    size_t bufferSize)
{
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			       size_t bufferSize)
{
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult r = instantiate(phGraphExec, hGraph);

	if (p)
		p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
	return r;
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return cuGraphInstantiateWithParams(phGraphExec, hGraph, p);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	if (!hGraphExec)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	sim_exec_put_locked(hGraphExec);
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}

/* The whole graph is one operation of the stream: its nodes run back to back. */
static CUresult graph_launch(CUgraphExec e, CUstream h, int pt)
{
	struct sim_op *op;
	SIM_RESOLVE(h, pt, s);

	if (!e)
		return CUDA_ERROR_INVALID_VALUE;
	op = sim_op_new(OP_GRAPH);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	e->refs++;
	pthread_mutex_unlock(&sim_lock);
	op->u.graph.exec = e;
	if (s->cgraph) {
		/* Capturing a graph launch would need child graphs: not simulated. */
		pthread_mutex_lock(&sim_lock);
		sim_op_free(op);
		pthread_mutex_unlock(&sim_lock);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	return sim_enqueue(s, op, 0);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream, 0);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream, 1);
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return cuGraphUpload(hGraphExec, hStream);
}
